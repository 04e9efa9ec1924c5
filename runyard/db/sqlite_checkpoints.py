"""SQL on the embedded mode's SQLite files: opening them, and on the checkpoint file
(langgraph-checkpoint-sqlite's tables) what its saver does not offer: attaching the runs'
database for fenced writes, deleting a run's checkpoints, pruning a thread down to its latest
checkpoint, and what a thread's checkpoints occupy."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import aiosqlite

from runyard.db.checkpoints import SQLITE_ATTACHED, storage_report

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


async def open_sqlite(path: Path, **options: Any) -> aiosqlite.Connection:
    """A connection to a SQLite file of the embedded mode (checkpoints, store) in WAL mode,
    waiting up to 30 s for another writer instead of failing at once."""
    conn = await aiosqlite.connect(str(path), **options)
    try:
        await conn.execute("PRAGMA journal_mode=WAL")
        await conn.execute("PRAGMA busy_timeout=30000")
    except BaseException:
        await conn.close()
        raise
    return conn


async def attach_runs(conn: aiosqlite.Connection, database: Path) -> None:
    """Attach Runyard's database (where the runs are) for fenced writes to read."""
    await conn.execute(f"ATTACH DATABASE ? AS {SQLITE_ATTACHED}", (str(database),))


async def delete_checkpoints_by_id(
    conn: aiosqlite.Connection, thread_id: str, checkpoint_ids: Sequence[str]
) -> None:
    """Delete these checkpoints of a thread and their writes."""
    marks = ",".join("?" for _ in checkpoint_ids)
    for table in ("writes", "checkpoints"):
        await conn.execute(
            f"DELETE FROM {table} WHERE thread_id = ? AND checkpoint_id IN ({marks})",
            (thread_id, *checkpoint_ids),
        )
    await conn.commit()


async def delete_checkpoints(conn: aiosqlite.Connection, thread_ids: Sequence[str]) -> None:
    """Delete every checkpoint and write of the threads."""
    for thread_id in thread_ids:
        await conn.execute("DELETE FROM checkpoints WHERE thread_id = ?", (thread_id,))
        await conn.execute("DELETE FROM writes WHERE thread_id = ?", (thread_id,))
    await conn.commit()
