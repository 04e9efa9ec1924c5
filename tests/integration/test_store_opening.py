"""The PostgreSQL store opens on its first operation, and TTL sweeps never open it."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from langgraph.store.base import BaseStore, GetOp, PutOp
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from runyard.db.driver import StatementPool
from runyard.db.engine import create_engine, on_each_statement
from runyard.domain.errors import InvalidInputError
from runyard.longterm_store.store import StoreOptions, open_store
from tests.support.databases import fresh_database, open_statement_pool, until_true

pytestmark = [pytest.mark.postgres, pytest.mark.timeout(60)]

OPTIONS = StoreOptions(
    index=None,
    ttl={"refresh_on_read": True, "omit_expired": True, "default_ttl": None},
    sweep_interval_seconds=300.0,
)


@dataclass
class Database:
    """A fresh PostgreSQL database, an engine on it, and Runyard's statement pool."""

    url: str
    engine: AsyncEngine
    statements: StatementPool
    counted: list[int]

    def store_url(self, name: str) -> str:
        """The database URL under which a store's connections show as `name`."""
        return "postgresql+asyncpg://" + self.url.split("://", 1)[1] + f"?application_name={name}"

    def open_store(self, name: str, data_dir: Path) -> AbstractAsyncContextManager[BaseStore]:
        """A PostgreSQL store on this database whose connections show as `name`."""
        return open_store(self.store_url(name), data_dir, OPTIONS, 1, self.statements)

    @asynccontextmanager
    async def store_used_once(self, name: str, data_dir: Path) -> AsyncIterator[BaseStore]:
        """`open_store` for a block that uses it: afterwards the store holds exactly one
        connection, and on exit its pool is closed and the connection gone."""
        async with self.open_store(name, data_dir) as store:
            yield store
            await self.until_connections(name, 1)
            pool = store._pool  # type: ignore[attr-defined]
        assert pool.closed
        await self.until_connections(name, 0)

    async def scalar(self, sql: str) -> Any:
        """The first value of one query run on a connection of the engine."""
        async with self.engine.connect() as conn:
            return (await conn.execute(text(sql))).scalar()

    async def execute(self, sql: str) -> None:
        """Run and commit one statement on a connection of the engine."""
        async with self.engine.begin() as conn:
            await conn.execute(text(sql))

    async def store_table_exists(self) -> bool:
        """Whether the store's table was created on this database."""
        return bool(await self.scalar("SELECT to_regclass('store') IS NOT NULL"))

    async def connections(self, name: str) -> int:
        """How many connections a store named `name` holds open right now."""
        return int(await self.scalar(_connections(name)))

    async def until_connections(self, name: str, count: int) -> None:
        """Wait until the store named `name` holds exactly `count` connections."""
        await until_true(
            self.engine, f"SELECT ({_connections(name)}) = {count}", f"{count} for {name}"
        )


def _connections(name: str) -> str:
    return (
        "SELECT count(*) FROM pg_stat_activity "
        f"WHERE datname = current_database() AND application_name = '{name}'"
    )


def store_name() -> str:
    """An application name no other store uses."""
    return f"store_{uuid.uuid4().hex[:8]}"


@pytest.fixture
async def database() -> AsyncIterator[Database]:
    with fresh_database("runyard_store") as url:
        engine = create_engine("postgresql+asyncpg://" + url.split("://", 1)[1], pool_size=2)
        counted: list[int] = []
        on_each_statement(engine, lambda: counted.append(1))
        try:
            async with open_statement_pool(engine) as statements:
                yield Database(url, engine, statements, counted)
        finally:
            await engine.dispose()


async def sweep(store: BaseStore) -> int:
    """Run the store's TTL sweep, as the runtime's TtlSweeper does."""
    swept: int = await store.sweep_ttl()  # type: ignore[attr-defined]
    return swept


async def test_the_store_connects_and_sets_up_on_its_first_operation(
    database: Database, tmp_path: Path
) -> None:
    name = store_name()
    async with database.store_used_once(name, tmp_path) as store:
        assert store.supports_ttl  # LangGraph reads it before any operation
        assert await database.connections(name) == 0
        assert not await database.store_table_exists()

        await store.aput(("users", "u1"), "prefs", {"theme": "dark"})
        assert await database.store_table_exists()
        item = await store.aget(("users", "u1"), "prefs")
        assert item is not None and item.value == {"theme": "dark"}


async def test_concurrent_first_operations_open_the_store_once(
    database: Database, tmp_path: Path
) -> None:
    name = store_name()
    peak = 0

    async def watch() -> None:
        nonlocal peak
        while True:
            peak = max(peak, await database.connections(name))
            await asyncio.sleep(0.005)

    async with database.store_used_once(name, tmp_path) as store:
        watcher = asyncio.create_task(watch())
        try:
            # abatch straight away, past the store's per-tick batching: the two really race.
            put, missing = await asyncio.gather(
                store.abatch([PutOp(("ns",), "k", {"v": 1})]),
                store.abatch([GetOp(("ns",), "absent")]),
            )
        finally:
            watcher.cancel()
        # The pool keeps its connection: seen now even if no sample fell inside the race.
        peak = max(peak, await database.connections(name))
        assert put == [None] and missing == [None]
        got = await store.aget(("ns",), "k")
        assert got is not None and got.value == {"v": 1}
        # Opened once: the pool's one connection and the set-up lock's, never a second pool.
        assert 1 <= peak <= 2, peak


async def test_synchronous_calls_work_from_other_threads_only(
    database: Database, tmp_path: Path
) -> None:
    async with database.open_store(store_name(), tmp_path) as store:
        await asyncio.to_thread(store.put, ("ns",), "k", {"v": 2})
        item = await asyncio.to_thread(store.get, ("ns",), "k")
        assert item is not None and item.value == {"v": 2}
        with pytest.raises(asyncio.InvalidStateError, match="asynchronous interface"):
            store.batch([GetOp(("ns",), "k")])


async def test_a_nul_character_is_invalid_input(database: Database, tmp_path: Path) -> None:
    async with database.open_store(store_name(), tmp_path) as store:
        with pytest.raises(InvalidInputError, match="NUL"):
            await store.aput(("ns",), "k\x00", {"v": 1})
        with pytest.raises(InvalidInputError, match="NUL"):
            await store.aput(("ns",), "k", {"v": "a\x00b"})
        await store.aput(("ns",), "k", {"v": "ab"})  # the store is still usable


async def test_a_sweep_on_a_database_never_set_up_deletes_nothing(
    database: Database, tmp_path: Path
) -> None:
    name = store_name()
    async with database.open_store(name, tmp_path) as store:
        before = len(database.counted)
        assert await sweep(store) == 0
        assert len(database.counted) > before  # counted with Runyard's own statements
        assert not await database.store_table_exists()
        assert await database.connections(name) == 0


async def test_a_sweep_deletes_expired_items_without_opening_the_store(
    database: Database, tmp_path: Path
) -> None:
    writer_name, sweeper_name = store_name(), store_name()
    async with (
        database.open_store(writer_name, tmp_path) as writer,
        database.open_store(sweeper_name, tmp_path) as sweeper,
    ):
        await writer.aput(("ns",), "expired", {"v": 1}, ttl=1.0)
        await writer.aput(("ns",), "alive", {"v": 2}, ttl=1.0)
        await writer.aput(("ns",), "forever", {"v": 3})
        await database.execute(
            "UPDATE store SET expires_at = now() - interval '1 second' WHERE key = 'expired'"
        )

        assert await sweep(sweeper) == 1
        assert await sweep(sweeper) == 0
        keys = await database.scalar("SELECT string_agg(key, ',' ORDER BY key) FROM store")
        assert keys == "alive,forever"
        assert await database.connections(sweeper_name) == 0
        # The store that is open sweeps the same way.
        await database.execute(
            "UPDATE store SET expires_at = now() - interval '1 second' WHERE key = 'alive'"
        )
        assert await sweep(writer) == 1
        assert await writer.aget(("ns",), "alive") is None
