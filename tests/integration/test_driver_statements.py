"""Statements sent straight to asyncpg read and write exactly what SQLAlchemy would."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import bindparam, insert, select, text
from sqlalchemy.exc import DataError, IntegrityError, OperationalError
from sqlalchemy.ext.asyncio import AsyncEngine

from app.db import runs as runs_db
from app.db.driver import fetch_all, fetch_one
from app.db.engine import create_engine, migrate, on_each_statement, session_factory
from app.db.tables import assistants
from tests.support.databases import fresh_database

pytestmark = pytest.mark.postgres

_GET = select(assistants).where(assistants.c.assistant_id == bindparam("p_id"))
_INSERT = insert(assistants).returning(*assistants.c)


@pytest.fixture
async def engine() -> AsyncIterator[AsyncEngine]:
    with fresh_database("runyard_driver") as url:
        engine = create_engine("postgresql+asyncpg://" + url.split("://", 1)[1], pool_size=2)
        try:
            await migrate(engine)
            yield engine
        finally:
            await engine.dispose()


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


async def test_rows_match_what_sqlalchemy_reads(engine: AsyncEngine) -> None:
    counted: list[int] = []
    on_each_statement(engine, lambda: counted.append(1))
    autocommit = session_factory(engine, autocommit=True)
    async with autocommit() as session:
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
    # Three statements sent to the driver, one by SQLAlchemy: each counted once.
    assert len(counted) == 4


_GET_MANY = select(assistants.c.assistant_id).where(
    assistants.c.assistant_id.in_(bindparam("p_ids", expanding=True))
)


async def test_a_statement_with_an_in_list_goes_through_sqlalchemy(engine: AsyncEngine) -> None:
    async with session_factory(engine, autocommit=True)() as session:
        await fetch_one(session, _INSERT, _assistant("in-a"))
        await fetch_one(session, _INSERT, _assistant("in-b"))
        rows = await fetch_all(session, _GET_MANY, {"p_ids": ["in-a", "in-b", "in-c"]})
    assert sorted(row["assistant_id"] for row in rows) == ["in-a", "in-b"]


async def test_a_session_in_a_transaction_keeps_its_statements_in_it(engine: AsyncEngine) -> None:
    sessions = session_factory(engine)
    async with sessions() as session:
        await session.begin()
        await fetch_one(session, _INSERT, _assistant("rolled-back"))
        assert await fetch_one(session, _GET, {"p_id": "rolled-back"}) is not None
        await session.rollback()
    async with session_factory(engine, autocommit=True)() as session:
        assert await fetch_one(session, _GET, {"p_id": "rolled-back"}) is None


async def test_database_errors_arrive_as_sqlalchemy_errors(engine: AsyncEngine) -> None:
    autocommit = session_factory(engine, autocommit=True)
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


async def test_a_connection_lost_under_a_statement_is_replaced(engine: AsyncEngine) -> None:
    autocommit = session_factory(engine, autocommit=True)
    async with autocommit() as session:
        pid = (await session.execute(text("SELECT pg_backend_pid()"))).scalar_one()
        async with engine.connect() as other:
            await other.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})
        with pytest.raises(OperationalError) as lost:
            await runs_db.get_run(session, "any")
        assert lost.value.connection_invalidated
    async with autocommit() as session:
        assert await runs_db.get_run(session, "any") is None
