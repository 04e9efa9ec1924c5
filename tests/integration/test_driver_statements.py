"""Statements sent straight to asyncpg read and write exactly what SQLAlchemy would."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import bindparam, func, insert, select, text
from sqlalchemy.exc import DataError, IntegrityError, OperationalError
from sqlalchemy.ext.asyncio import AsyncEngine

from runyard.db import runs as runs_db
from runyard.db.driver import DeferredConnection, StatementPool, fetch_all, fetch_one
from runyard.db.engine import Sessions, on_each_statement, session_factory
from runyard.db.tables import assistants
from tests.support.databases import (
    fresh_database,
    migrated_postgres_engine,
    open_statement_pool,
    until_true,
)

pytestmark = pytest.mark.postgres

_GET = select(assistants).where(assistants.c.assistant_id == bindparam("p_id"))
_INSERT = insert(assistants).returning(*assistants.c)


@pytest.fixture
async def engine() -> AsyncIterator[AsyncEngine]:
    with fresh_database("runyard_driver") as url:
        async with migrated_postgres_engine(url) as engine:
            yield engine


@pytest.fixture
async def statements(engine: AsyncEngine) -> AsyncIterator[StatementPool]:
    async with open_statement_pool(engine) as pool:
        yield pool


def _standalone(engine: AsyncEngine, statements: StatementPool) -> Sessions:
    return session_factory(engine, autocommit=True, statements=statements)


def _assistant(assistant_id: str, **extra: Any) -> dict[str, Any]:
    return {
        "assistant_id": assistant_id,
        "graph_id": "g",
        "name": "n",
        "config": {"configurable": {"big": 2**70, "text": "é"}},
        "context": {},
        "metadata": {"nested": [1, None, True]},
        "version": 1,
        "created_at": datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC),
        "updated_at": datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC),
        **extra,
    }


async def test_rows_match_what_sqlalchemy_reads(
    engine: AsyncEngine, statements: StatementPool
) -> None:
    counted: list[int] = []
    on_each_statement(engine, lambda: counted.append(1))
    autocommit = _standalone(engine, statements)
    async with autocommit() as session:
        assert isinstance(session, DeferredConnection)
        stored = await fetch_one(session, _INSERT, _assistant("a1"))
        direct = await fetch_one(session, _GET, {"p_id": "a1"})
        missing = await fetch_one(session, _GET, {"p_id": "nope"})
    async with engine.connect() as conn:
        expected = dict((await conn.execute(_GET, {"p_id": "a1"})).mappings().one())
    assert stored == direct == expected
    assert direct is not None
    assert direct["config"]["configurable"]["big"] == 2**70
    assert direct["created_at"] == datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)
    assert missing is None
    # Three statements sent to the statement pool, one by SQLAlchemy: each counted once.
    assert len(counted) == 4
    # A session that sent only statements of the pool never checked a connection out.
    assert session.sync_connection is None


_GET_MANY = select(assistants.c.assistant_id).where(
    assistants.c.assistant_id.in_(bindparam("p_ids", expanding=True))
)


async def test_a_statement_with_an_in_list_goes_through_sqlalchemy(
    engine: AsyncEngine, statements: StatementPool
) -> None:
    async with _standalone(engine, statements)() as session:
        await fetch_one(session, _INSERT, _assistant("in-a"))
        await fetch_one(session, _INSERT, _assistant("in-b"))
        rows = await fetch_all(session, _GET_MANY, {"p_ids": ["in-a", "in-b", "in-c"]})
    assert sorted(row["assistant_id"] for row in rows) == ["in-a", "in-b"]


async def test_a_session_in_a_transaction_keeps_its_statements_in_it(
    engine: AsyncEngine, statements: StatementPool
) -> None:
    sessions = session_factory(engine)
    async with sessions() as session:
        await session.begin()
        await fetch_one(session, _INSERT, _assistant("rolled-back"))
        assert await fetch_one(session, _GET, {"p_id": "rolled-back"}) is not None
        await session.rollback()
    async with _standalone(engine, statements)() as session:
        assert await fetch_one(session, _GET, {"p_id": "rolled-back"}) is None


async def test_database_errors_arrive_as_sqlalchemy_errors(
    engine: AsyncEngine, statements: StatementPool
) -> None:
    autocommit = _standalone(engine, statements)
    async with autocommit() as session:
        await fetch_one(session, _INSERT, _assistant("dup"))
        with pytest.raises(IntegrityError):
            await fetch_one(session, _INSERT, _assistant("dup"))
        with pytest.raises(DataError) as refused:
            await fetch_one(session, _INSERT, _assistant("nul", metadata={"k": "a\u0000b"}))
        assert refused.value.orig is not None
        assert getattr(refused.value.orig, "sqlstate", None) == "22P05"
    async with autocommit() as session:
        assert await fetch_one(session, _GET, {"p_id": "nul"}) is None


_BACKEND_PID = select(func.pg_backend_pid().label("pid"))
_SLEEP = select(func.pg_sleep(bindparam("p_seconds")).label("slept"))


async def test_a_connection_lost_under_a_statement_is_replaced(
    engine: AsyncEngine, statements: StatementPool
) -> None:
    autocommit = _standalone(engine, statements)

    async def terminate_the_sleeper() -> None:
        await until_true(
            engine,
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE query LIKE 'SELECT pg_sleep%' AND pid <> pg_backend_pid()",
            "the sleeping statement showing up",
            tries=200,
        )

    async with autocommit() as session:
        before = await fetch_one(session, _BACKEND_PID, {})
        killer = asyncio.create_task(terminate_the_sleeper())
        with pytest.raises(OperationalError) as lost:
            await fetch_one(session, _SLEEP, {"p_seconds": 30})
        await killer
        assert lost.value.connection_invalidated
    async with autocommit() as session:
        assert await runs_db.get_run(session, "any") is None
        after = await fetch_one(session, _BACKEND_PID, {})
    assert before is not None and after is not None
    assert after["pid"] != before["pid"]


async def test_statements_sqlalchemy_executes_check_a_connection_out_on_first_use(
    engine: AsyncEngine, statements: StatementPool
) -> None:
    async with _standalone(engine, statements)() as session:
        assert session.sync_connection is None
        assert (await session.execute(text("SELECT 1"))).scalar_one() == 1
        assert session.sync_connection is not None
        checked_out = session.sync_connection
    assert checked_out.closed


_BACKENDS = text(
    "SELECT count(*) FROM pg_stat_activity "
    "WHERE datname = current_database() AND pid <> pg_backend_pid()"
)


async def test_the_pool_opens_at_most_its_size_and_reuses_connections(
    engine: AsyncEngine, statements: StatementPool
) -> None:
    autocommit = _standalone(engine, statements)
    seen: list[int] = []

    async def one() -> None:
        async with autocommit() as session:
            await fetch_one(session, _SLEEP, {"p_seconds": 0.05})
            row = await fetch_one(session, _BACKEND_PID, {})
            assert row is not None
            seen.append(row["pid"])

    # Eight at once on a pool of two: they wait their turn on the same two backends.
    await asyncio.gather(*(one() for _ in range(8)))
    assert len(seen) == 8
    assert len(set(seen)) <= 2
    async with engine.connect() as other:
        # Besides this one: the pool's two at most (the engine's own pool holds no other).
        assert (await other.execute(_BACKENDS)).scalar_one() <= 2


async def test_an_error_the_server_answers_keeps_the_connection(
    engine: AsyncEngine, statements: StatementPool
) -> None:
    async with _standalone(engine, statements)() as session:
        await fetch_one(session, _INSERT, _assistant("kept"))
        before = await fetch_one(session, _BACKEND_PID, {})
        with pytest.raises(IntegrityError):
            await fetch_one(session, _INSERT, _assistant("kept"))
        after = await fetch_one(session, _BACKEND_PID, {})
    assert before is not None and after is not None
    assert after["pid"] == before["pid"]


async def test_a_statement_cancelled_midway_closes_its_connection(
    engine: AsyncEngine, statements: StatementPool
) -> None:
    autocommit = _standalone(engine, statements)
    async with autocommit() as session:
        before = await fetch_one(session, _BACKEND_PID, {})
        sleeper = asyncio.create_task(fetch_one(session, _SLEEP, {"p_seconds": 30}))
        await asyncio.sleep(0.2)
        sleeper.cancel()
        with pytest.raises(asyncio.CancelledError):
            await sleeper
        # The interrupted connection is not lent again: the next statement gets another.
        after = await fetch_one(session, _BACKEND_PID, {})
        assert await fetch_one(session, _GET, {"p_id": "none"}) is None
    assert before is not None and after is not None
    assert after["pid"] != before["pid"]


async def test_a_closed_pool_refuses_statements(engine: AsyncEngine) -> None:
    async with open_statement_pool(engine) as pool:
        autocommit = _standalone(engine, pool)
        async with autocommit() as session:
            assert await fetch_one(session, _GET, {"p_id": "none"}) is None
    with pytest.raises(RuntimeError, match="not open"):
        async with autocommit() as session:
            await fetch_one(session, _GET, {"p_id": "none"})
