"""Work that processes starting together take in turn: the table setup of LangGraph's
PostgreSQL savers, and migrations (an advisory lock on PostgreSQL, a lock file on SQLite)."""

from __future__ import annotations

import asyncio
import fcntl
import os
from collections.abc import Awaitable, Callable
from pathlib import Path

from runyard.db.conninfo import asyncpg_connector, parse_postgres_url

# CREATE TABLE IF NOT EXISTS is not safe when run concurrently: two instances creating the same
# table at the same moment can fail on a unique violation in PostgreSQL's catalog. Each
# setup() runs under an advisory lock of its own; the instances after the first find nothing
# left to do.
CHECKPOINTER_SETUP_LOCK = 72_797_102
STORE_SETUP_LOCK = 72_797_101
RETRY_SECONDS = 0.05
# Taken or not at once: a waiting instance polls (see `setup_alone`).
_TRY_LOCK = "SELECT pg_try_advisory_lock($1)"


async def setup_alone(
    conninfo: str,
    key: int,
    setup: Callable[[], Awaitable[None]],
    on_wait: Callable[[], None] | None = None,
) -> None:
    """Run `setup()` while holding the advisory lock `key`; `on_wait()` is called once when
    another process holds it.

    The lock is held on a connection of its own, outside the saver's pool, so a pool of a
    single connection is still free for setup() itself; closing it releases the lock. A
    waiting instance polls for the lock instead of blocking on it: setup() creates indexes
    CONCURRENTLY, which waits for every open statement of the database, a blocked lock
    request included, and the two would wait for each other for ever.
    """
    conn = await asyncpg_connector(parse_postgres_url(conninfo))()
    try:
        while not await conn.fetchval(_TRY_LOCK, key):
            if on_wait is not None:
                on_wait()
                on_wait = None
            await asyncio.sleep(RETRY_SECONDS)
        await setup()
    finally:
        await conn.close()


async def alone_on_file(
    lock_path: Path, work: Callable[[], Awaitable[None]], on_wait: Callable[[], None] | None = None
) -> None:
    """Run `work()` while holding an exclusive lock on `lock_path` (created if missing);
    `on_wait()` is called once when another process holds it.

    SQLite has no advisory lock, and its own write lock does not cover a migration (Python's
    sqlite3 commits each DDL statement on its own). The operating system releases the lock
    when its process dies, so a migrator killed half-way never blocks the next one.
    """
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if on_wait is not None:
                    on_wait()
                    on_wait = None
                await asyncio.sleep(RETRY_SECONDS)
        await work()
    finally:
        os.close(fd)  # releases the lock
