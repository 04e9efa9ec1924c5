"""SQL on the SQLite checkpoint file (langgraph-checkpoint-sqlite's tables), for what its
saver does not offer: pruning a thread down to its latest checkpoint."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import aiosqlite

from runyard.db.checkpoints import storage_report

# The newest checkpoint of each namespace of the thread stays; checkpoint ids are
# time-ordered, as the library's own "latest" query relies on.
_DELETE_OLDER_CHECKPOINTS = """
DELETE FROM checkpoints WHERE thread_id = ? AND (checkpoint_ns, checkpoint_id) NOT IN (
SELECT checkpoint_ns, MAX(checkpoint_id) FROM checkpoints WHERE thread_id = ?
GROUP BY checkpoint_ns)
"""
_DELETE_OLDER_WRITES = """
DELETE FROM writes WHERE thread_id = ? AND (checkpoint_ns, checkpoint_id) NOT IN (
SELECT checkpoint_ns, checkpoint_id FROM checkpoints WHERE thread_id = ?)
"""


async def keep_latest_checkpoints(conn: aiosqlite.Connection, thread_ids: Sequence[str]) -> None:
    """Delete every checkpoint (and its writes) of the threads but the newest per namespace."""
    for thread_id in thread_ids:
        await conn.execute(_DELETE_OLDER_CHECKPOINTS, (thread_id, thread_id))
        await conn.execute(_DELETE_OLDER_WRITES, (thread_id, thread_id))
    await conn.commit()


async def thread_storage(conn: aiosqlite.Connection, thread_id: str) -> dict[str, Any]:
    """Counts and bytes of a thread's checkpoints and pending writes. The SQLite saver keeps
    channel values inside each checkpoint, so `channel_values` has nothing of its own."""
    async with conn.execute(
        "SELECT count(*), coalesce(sum(length(checkpoint) + length(metadata)), 0) "
        "FROM checkpoints WHERE thread_id = ?",
        (thread_id,),
    ) as cursor:
        checkpoints = await cursor.fetchone()
    async with conn.execute(
        "SELECT count(*), coalesce(sum(length(value)), 0) FROM writes WHERE thread_id = ?",
        (thread_id,),
    ) as cursor:
        writes = await cursor.fetchone()
    assert checkpoints is not None and writes is not None  # aggregates always give a row
    return storage_report(
        (int(checkpoints[0]), int(checkpoints[1])), {}, (int(writes[0]), int(writes[1]))
    )


async def delete_checkpoints(conn: aiosqlite.Connection, thread_ids: Sequence[str]) -> None:
    """Delete every checkpoint and write of the threads."""
    for thread_id in thread_ids:
        await conn.execute("DELETE FROM checkpoints WHERE thread_id = ?", (thread_id,))
        await conn.execute("DELETE FROM writes WHERE thread_id = ?", (thread_id,))
    await conn.commit()
