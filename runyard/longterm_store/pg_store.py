"""LangGraph's PostgreSQL store, opened on its first use instead of at start-up.

Opening `AsyncPostgresStore` means importing psycopg, psycopg_pool and the library's
PostgreSQL modules (about 10 MiB of resident memory), holding a pooled connection, and
running its table setup. An instance whose graphs and clients never touch the store needs
none of it. `DeferredPostgresStore` does all three on the first store operation (under a
lock, so concurrent first calls open it once) and hands every operation to the library's
store from then on.

Its TTL sweep, which every instance runs every sweep interval, goes to asyncpg through
Runyard's statement pool instead, so sweeping never opens the store either.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from langgraph.store.base import Op, Result, TTLConfig
from langgraph.store.base.batch import AsyncBatchedBaseStore

from runyard.checkpoints.pg_errors import client_data_errors
from runyard.checkpoints.psycopg_pools import open_psycopg_pool
from runyard.db.setup_lock import STORE_SETUP_LOCK, setup_alone
from runyard.db.store import PGVECTOR_AVAILABLE, delete_expired_store_items, store_sweepable
from runyard.domain.errors import ConfigError

if TYPE_CHECKING:
    from runyard.db.driver import StatementPool


class DeferredPostgresStore(AsyncBatchedBaseStore):
    """A PostgreSQL store whose pool and tables are made on first use.

    Like the library's store, it gathers the operations of one event-loop tick into one
    batch (`AsyncBatchedBaseStore`) and answers the synchronous methods from other threads
    through the loop; each batch goes to the library's `AsyncPostgresStore.abatch`.
    """

    # What LangGraph reads before any operation: TTLs are honoured, as by the library's store.
    supports_ttl: bool = True

    def __init__(
        self,
        conninfo: str,
        index: dict[str, Any] | None,
        ttl: TTLConfig,
        pool_size: int,
        statements: StatementPool | None = None,
    ) -> None:
        super().__init__()
        self.ttl_config = ttl
        self._conninfo = conninfo
        self._index = index
        self._pool_size = pool_size
        self._statements = statements
        self._opening = asyncio.Lock()
        self._pool: Any = None
        self._store: Any = None
        self._closed = False

    @property
    def index_config(self) -> Any:
        """The semantic index configuration as the library's store completed it, or None."""
        return None if self._store is None else self._store.index_config

    async def open(self) -> None:
        """Open the pool and set up the tables now, if not done yet (idempotent)."""
        await self._opened()

    async def close(self) -> None:
        """Close the pool if it was opened; the store cannot be opened afterwards."""
        async with self._opening:
            self._closed = True
            pool, self._pool = self._pool, None
        if pool is not None:
            await pool.close()

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """Run a batch of operations on the library's store, opening it first if need be."""
        store = await self._opened()
        with client_data_errors():
            results: list[Result] = await store.abatch(ops)
        return results

    async def sweep_ttl(self) -> int:
        """Delete the expired items (whoever wrote them); how many.

        Given Runyard's statement pool, the sweep goes through it and never opens the store.
        """
        statements = self._statements
        if statements is None:
            store = await self._opened()
            return int(await store.sweep_ttl())
        # Until some instance has used the store, its table does not exist: nothing expired.
        if self._store is None and not await store_sweepable(statements):
            return 0
        return await delete_expired_store_items(statements)

    async def _opened(self) -> Any:
        store = self._store
        if store is not None:
            return store
        async with self._opening:
            if self._closed:
                raise RuntimeError("the store is closed")
            if self._store is None:
                self._pool, self._store = await self._connect()
            return self._store

    async def _connect(self) -> tuple[Any, Any]:
        from langgraph.store.postgres.aio import AsyncPostgresStore

        pool = await open_psycopg_pool(self._conninfo, self._pool_size)
        try:
            if self._index is not None:
                await _require_pgvector(pool)
            store = AsyncPostgresStore(
                pool,  # type: ignore[arg-type]
                index=self._index,  # type: ignore[arg-type]
                ttl=self.ttl_config,
            )
            await setup_alone(self._conninfo, STORE_SETUP_LOCK, store.setup)
        except BaseException:
            await pool.close()
            raise
        return pool, store


async def _require_pgvector(pool: Any) -> None:
    async with pool.connection() as conn:
        cursor = await conn.execute(PGVECTOR_AVAILABLE)
        available = await cursor.fetchone()
    if available is None:
        raise ConfigError(
            "store.index (semantic search) needs the pgvector extension, which this "
            "PostgreSQL server does not have; install pgvector "
            "(https://github.com/pgvector/pgvector) or remove store.index from langgraph.json"
        )
