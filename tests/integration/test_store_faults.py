"""Failed statements are told apart by what they are: the store away, a statement fault, a
transaction conflict, or an error, on a real PostgreSQL and a real SQLite file."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator, Awaitable
from pathlib import Path
from typing import Any

import asyncpg
import psycopg
import pytest
from sqlalchemy import insert
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from runyard.db import run_attempts as attempts_db
from runyard.db import threads as threads_db
from runyard.db.driver import StatementPool
from runyard.db.engine import session_factory
from runyard.db.faults import (
    retry_while_store_unavailable,
    store_fault,
    store_unavailable,
    transaction_conflict,
)
from runyard.db.tables import metadata, threads
from runyard.lifecycle.transactions import Transactions
from tests.support.databases import (
    ADMIN_URL,
    fresh_database,
    migrated_postgres_engine,
    open_statement_pool,
)
from tests.support.server import free_port

pytestmark = pytest.mark.postgres


@pytest.fixture
async def database() -> AsyncIterator[str]:
    """A fresh migrated database whose statements time out after 300 ms."""
    with fresh_database("runyard_faults") as url:
        name = url.rsplit("/", 1)[1]
        with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
            admin.execute(f"ALTER DATABASE \"{name}\" SET statement_timeout = '300ms'")
        yield url


@pytest.fixture
async def engine(database: str) -> AsyncIterator[AsyncEngine]:
    async with migrated_postgres_engine(database) as engine:
        yield engine


@pytest.fixture
async def statements(engine: AsyncEngine) -> AsyncIterator[StatementPool]:
    async with open_statement_pool(engine) as pool:
        yield pool


async def _raised(call: Awaitable[Any]) -> BaseException:
    try:
        await call
    except Exception as exc:
        return exc
    raise AssertionError("the statement did not fail")


def _raising(sqlstate: str) -> str:
    return f"DO $$ BEGIN RAISE EXCEPTION 'refused' USING ERRCODE = '{sqlstate}'; END $$"


@pytest.mark.timeout(30)
async def test_a_statement_timeout_is_a_fault_not_an_outage(statements: StatementPool) -> None:
    """57014 comes back every time the statement is sent: the attempt's problem."""
    exc = await _raised(statements.execute("SELECT pg_sleep(2)", []))
    assert not store_unavailable(exc)
    fault = store_fault(exc)
    assert fault is not None and "57014" in fault and "statement timeout" in fault
    assert not transaction_conflict(exc)


@pytest.mark.timeout(30)
async def test_a_statement_timeout_through_sqlalchemy_is_a_fault(
    engine: AsyncEngine, database: str
) -> None:
    """The same on SQLAlchemy's own asyncpg path (a transaction): a lock held too long."""
    async with await psycopg.AsyncConnection.connect(database) as holder:
        await holder.execute("BEGIN")
        await holder.execute("LOCK TABLE runs IN ACCESS EXCLUSIVE MODE")
        async with engine.connect() as session, session.begin():
            exc = await _raised(attempts_db.still_holds(session, "r", 1))
    assert not store_unavailable(exc)
    assert store_fault(exc) is not None


@pytest.mark.timeout(30)
async def test_a_terminated_connection_is_the_store_away(
    statements: StatementPool, database: str
) -> None:
    """57P01 (what a restart or pg_terminate_backend sends): the store is away."""
    name = database.rsplit("/", 1)[1]
    sleeper = asyncio.ensure_future(statements.execute("SELECT pg_sleep(0.25)", []))
    with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
        for _ in range(100):
            killed = admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = %s AND query LIKE 'SELECT pg_sleep(0.25)%%'",
                (name,),
            ).fetchall()
            if killed:
                break
            await asyncio.sleep(0.01)
    exc = await _raised(sleeper)
    assert store_unavailable(exc)
    assert store_fault(exc) is None


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    ("sqlstate", "away", "conflict"),
    [
        ("57P01", True, False),  # admin shutdown
        ("57P03", True, False),  # cannot connect now (starting up, shutting down)
        ("53300", True, False),  # too many connections
        ("57014", False, False),  # query canceled
        ("53100", False, False),  # disk full
        ("53200", False, False),  # out of memory
        ("55P03", False, False),  # lock not available (lock_timeout)
        ("40001", False, True),  # serialization failure
        ("40P01", False, True),  # deadlock detected
    ],
)
async def test_sqlstates_are_classified(
    statements: StatementPool, sqlstate: str, away: bool, conflict: bool
) -> None:
    exc = await _raised(statements.execute(_raising(sqlstate), []))
    assert store_unavailable(exc) is away
    assert (store_fault(exc) is not None) is not away
    assert transaction_conflict(exc) is conflict


@pytest.mark.timeout(30)
@pytest.mark.parametrize("sqlstate", ["42601", "23505", "22P02", "XX000"])
async def test_other_errors_are_neither(statements: StatementPool, sqlstate: str) -> None:
    """A syntax error, a constraint, bad data: an error of the attempt at once."""
    exc = await _raised(statements.execute(_raising(sqlstate), []))
    assert not store_unavailable(exc)
    assert store_fault(exc) is None


@pytest.mark.timeout(30)
async def test_a_node_s_own_statement_timeout_is_not_the_store(database: str) -> None:
    """Only Runyard's storage code is judged: a node's own driver error stays the node's."""
    connection = await asyncpg.connect(database)
    try:
        exc = await _raised(connection.execute("SELECT pg_sleep(2)"))
    finally:
        await connection.close()
    assert not store_unavailable(exc)
    assert store_fault(exc) is None


@pytest.mark.timeout(30)
async def test_conflicts_are_retried_a_few_times_and_faults_not_at_all(
    statements: StatementPool,
) -> None:
    await statements.execute("CREATE SEQUENCE tries", [])
    await statements.execute(
        "CREATE FUNCTION flaky(n int) RETURNS int LANGUAGE plpgsql AS $$ BEGIN "
        "IF nextval('tries') <= n THEN RAISE EXCEPTION 'conflict' USING ERRCODE = '40P01'; "
        "END IF; RETURN 1; END $$",
        [],
    )
    calls = 0

    async def flaky() -> list[dict[str, object]]:
        nonlocal calls
        calls += 1
        return await statements.fetch_sql("SELECT flaky(2)", [])

    assert await retry_while_store_unavailable(flaky, 5, "test_retrying") == [{"flaky": 1}]
    assert calls == 3

    async def always() -> list[dict[str, object]]:
        nonlocal calls
        calls += 1
        return await statements.fetch_sql("SELECT flaky(1000)", [])

    calls = 0
    exc = await _raised(retry_while_store_unavailable(always, 5, "test_retrying"))
    assert transaction_conflict(exc) and calls == 4  # the first try and three more

    async def timing_out() -> None:
        nonlocal calls
        calls += 1
        await statements.execute("SELECT pg_sleep(2)", [])

    calls = 0
    exc = await _raised(retry_while_store_unavailable(timing_out, 5, "test_retrying"))
    assert store_fault(exc) is not None and calls == 1


@pytest.fixture
async def sqlite_engine(tmp_path: Path) -> AsyncIterator[AsyncEngine]:
    """Runyard's tables in a SQLite file, on an engine that waits 0.2 s for a lock."""
    engine = create_async_engine(
        f"sqlite+aiosqlite:///{tmp_path / 'runyard.sqlite'}", connect_args={"timeout": 0.2}
    )
    async with engine.begin() as session:
        await session.run_sync(metadata.create_all)
        await session.execute(
            insert(threads).values(thread_id="t", metadata={}, config={}, interrupts={})
        )
    try:
        yield engine
    finally:
        await engine.dispose()


@pytest.mark.timeout(30)
async def test_sqlite_locked_past_the_busy_timeout_is_a_fault(
    sqlite_engine: AsyncEngine, tmp_path: Path
) -> None:
    """ "database is locked": a writer held the file past the busy timeout. SQLite has no
    server to come back, so it counts like a statement timeout rather than an outage."""
    holder = sqlite3.connect(tmp_path / "runyard.sqlite", isolation_level=None)
    try:
        holder.execute("BEGIN EXCLUSIVE")
        async with sqlite_engine.begin() as session:
            exc = await _raised(threads_db.set_metadata(session, "t", {"a": 1}))
    finally:
        holder.close()
    assert "database is locked" in str(exc)
    assert not store_unavailable(exc)
    fault = store_fault(exc)
    assert fault is not None and "SQLITE_BUSY" in fault


@pytest.mark.timeout(30)
async def test_sqlite_full_disk_is_a_fault(sqlite_engine: AsyncEngine) -> None:
    """SQLITE_FULL ("database or disk is full"), as a disk full or I/O error would be."""
    async with sqlite_engine.begin() as session:
        await session.exec_driver_sql("PRAGMA max_page_count = 1")
        exc = await _raised(threads_db.set_metadata(session, "t", {"big": "x" * 200_000}))
    assert "full" in str(exc)
    assert not store_unavailable(exc)
    fault = store_fault(exc)
    assert fault is not None and "SQLITE_FULL" in fault


@pytest.mark.timeout(30)
async def test_sqlite_errors_of_the_statement_are_neither(tmp_path: Path) -> None:
    """A missing table is sqlite3's OperationalError too, but no outage and no fault."""
    engine = create_async_engine(f"sqlite+aiosqlite:///{tmp_path / 'empty.sqlite'}")
    try:
        async with engine.begin() as session:
            exc = await _raised(threads_db.set_metadata(session, "t", {}))
    finally:
        await engine.dispose()
    assert "no such table" in str(exc)
    assert not store_unavailable(exc)
    assert store_fault(exc) is None


@pytest.mark.timeout(30)
@pytest.mark.parametrize("backend", ["postgres", "sqlite"])
async def test_no_connection_free_in_time_is_the_store_away(backend: str, tmp_path: Path) -> None:
    """A session opened anywhere (here by a lifecycle transition) while every pooled
    connection is taken: busy for now, so retried, not the run's or the caller's error."""
    if backend == "postgres":
        url = ADMIN_URL.replace("postgresql://", "postgresql+asyncpg://", 1)
    else:
        url = f"sqlite+aiosqlite:///{tmp_path / 'pool.sqlite'}"
    engine = create_async_engine(url, pool_size=1, max_overflow=0, pool_timeout=0.2)
    transactions = Transactions(session_factory(engine), session_factory(engine, True), backend)
    try:
        async with engine.connect() as taken:
            await taken.exec_driver_sql("SELECT 1")
            exc = await _raised(transactions.transaction(_nothing))
    finally:
        await engine.dispose()
    assert "QueuePool limit" in str(exc)
    assert store_unavailable(exc)
    assert store_fault(exc) is None


@pytest.mark.timeout(30)
async def test_a_refused_connection_is_the_store_away_wherever_a_session_opens() -> None:
    """Nothing listens on the port: the database is away (a stopped or restarting server)."""
    engine = create_async_engine(f"postgresql+asyncpg://postgres@127.0.0.1:{free_port()}/x")
    sessions = session_factory(engine)
    transactions = Transactions(sessions, session_factory(engine, True), "postgresql")
    try:
        exc = await _raised(transactions.transaction(_nothing))
    finally:
        await engine.dispose()
    assert isinstance(exc, OSError)
    assert store_unavailable(exc)
    assert store_fault(exc) is None


async def _nothing(_session: Any) -> None:
    return None
