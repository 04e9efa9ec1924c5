"""LangGraph checkpoint savers per backend, and the thread-level operations they lack."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver


@asynccontextmanager
async def open_checkpointer(database_url: str, data_dir: Path) -> AsyncIterator[BaseCheckpointSaver]:
    """The saver matching the database: PostgreSQL (pooled psycopg) or a SQLite file."""
    if database_url.startswith("postgresql"):
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
        from psycopg.rows import dict_row
        from psycopg_pool import AsyncConnectionPool

        conninfo = "postgresql://" + database_url.split("://", 1)[1]
        pool = AsyncConnectionPool(
            conninfo,
            min_size=1,
            max_size=20,
            open=False,
            kwargs={"autocommit": True, "prepare_threshold": None, "row_factory": dict_row},
        )
        await pool.open(wait=True, timeout=30)
        try:
            saver = AsyncPostgresSaver(pool)  # type: ignore[arg-type]
            await saver.setup()
            yield saver
        finally:
            await pool.close()
    else:
        import aiosqlite
        from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

        data_dir.mkdir(parents=True, exist_ok=True)
        conn = await aiosqlite.connect(str(data_dir / "checkpoints.sqlite"))
        try:
            await conn.execute("PRAGMA journal_mode=WAL")
            await conn.execute("PRAGMA busy_timeout=30000")
            sqlite_saver = AsyncSqliteSaver(conn)
            await sqlite_saver.setup()
            yield sqlite_saver
        finally:
            await conn.close()


async def copy_thread_checkpoints(
    saver: BaseCheckpointSaver, source_thread_id: str, target_thread_id: str
) -> None:
    """Copy every checkpoint (and pending write) of one thread onto another, oldest first."""
    tuples = [t async for t in saver.alist({"configurable": {"thread_id": source_thread_id}})]
    for item in reversed(tuples):
        conf = item.config["configurable"]
        parent_id = (item.parent_config or {}).get("configurable", {}).get("checkpoint_id")
        target: dict[str, Any] = {
            "configurable": {
                "thread_id": target_thread_id,
                "checkpoint_ns": conf.get("checkpoint_ns", ""),
                **({"checkpoint_id": parent_id} if parent_id else {}),
            }
        }
        stored = await saver.aput(
            target,  # type: ignore[arg-type]
            item.checkpoint,
            item.metadata,
            dict(item.checkpoint["channel_versions"]),
        )
        by_task: dict[str, list[tuple[str, Any]]] = {}
        for task_id, channel, value in item.pending_writes or []:
            by_task.setdefault(task_id, []).append((channel, value))
        for task_id, writes in by_task.items():
            await saver.aput_writes(stored, writes, task_id)
