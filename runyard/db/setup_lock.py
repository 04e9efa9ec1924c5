"""Table setup of LangGraph's PostgreSQL savers that instances starting together take in turn."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

# CREATE TABLE IF NOT EXISTS is not safe when run concurrently: two instances creating the same
# table at the same moment can fail on a unique violation in PostgreSQL's catalog. Each
# setup() runs under an advisory lock of its own; the instances after the first find nothing
# left to do.
CHECKPOINTER_SETUP_LOCK = 72_797_102
STORE_SETUP_LOCK = 72_797_101
RETRY_SECONDS = 0.05
# Taken or not at once: a waiting instance polls (see `setup_alone`).
_TRY_LOCK = "SELECT pg_try_advisory_lock($1)"


async def setup_alone(conninfo: str, key: int, setup: Callable[[], Awaitable[None]]) -> None:
    """Run `setup()` while holding the advisory lock `key`.

    The lock is held on a connection of its own, outside the saver's pool, so a pool of a
    single connection is still free for setup() itself; closing it releases the lock. A
    waiting instance polls for the lock instead of blocking on it: setup() creates indexes
    CONCURRENTLY, which waits for every open statement of the database, a blocked lock
    request included, and the two would wait for each other for ever.
    """
    import asyncpg

    conn = await asyncpg.connect(conninfo)
    try:
        while True:
            if await conn.fetchval(_TRY_LOCK, key):
                break
            await asyncio.sleep(RETRY_SECONDS)
        await setup()
    finally:
        await conn.close()
