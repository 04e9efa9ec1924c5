"""LangGraph checkpoint savers per backend, and the thread-level operations they lack."""

from __future__ import annotations

import copy
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver

from app.db.driver import StatementPool
from app.domain.errors import StaleAttemptError
from app.graphs.setup_lock import CHECKPOINTER_SETUP_LOCK, setup_alone


class _NoLock:
    """Stands in for the saver's instance-wide lock: each pooled connection is used alone."""

    async def __aenter__(self) -> None:
        return None

    async def __aexit__(self, *_exc: object) -> None:
        return None


def _counting_cursor(on_statements: Callable[[int], None]) -> type:
    from psycopg import AsyncCursor

    class CountingCursor(AsyncCursor):  # type: ignore[type-arg]
        async def execute(self, *args: Any, **kwargs: Any) -> Any:
            on_statements(1)
            return await super().execute(*args, **kwargs)

        async def executemany(self, query: Any, params_seq: Any, **kwargs: Any) -> None:
            params_seq = list(params_seq)
            on_statements(len(params_seq))
            await super().executemany(query, params_seq, **kwargs)

    return CountingCursor


@asynccontextmanager
async def open_checkpointer(
    database_url: str,
    data_dir: Path,
    on_statements: Callable[[int], None] | None = None,
    pool_size: int = 10,
    statements: StatementPool | None = None,
) -> AsyncIterator[BaseCheckpointSaver]:
    """The saver matching the database: PostgreSQL (pooled psycopg) or a SQLite file.

    `on_statements(n)` is told of the statements the PostgreSQL saver sends; its pool
    opens at most `pool_size` connections. Given Runyard's statement pool on the same
    database, the PostgreSQL saver writes checkpoints through it (app/graphs/pg_saver.py).
    """
    if database_url.startswith("postgresql"):
        from psycopg.rows import dict_row
        from psycopg_pool import AsyncConnectionPool

        from app.graphs.pg_saver import LeanPostgresSaver

        conninfo = "postgresql://" + database_url.split("://", 1)[1]
        kwargs: dict[str, Any] = {
            "autocommit": True,
            # Server-side prepared statements, as the library's own connections use them:
            # unprepared, PostgreSQL parsed and planned every checkpoint query anew (a
            # quarter of its CPU per run). asyncpg prepares Runyard's own statements too.
            "prepare_threshold": 0,
            "row_factory": dict_row,
        }
        if on_statements is not None:
            kwargs["cursor_factory"] = _counting_cursor(on_statements)
        pool = AsyncConnectionPool(
            conninfo, min_size=1, max_size=pool_size, open=False, kwargs=kwargs
        )
        await pool.open(wait=True, timeout=30)
        try:
            saver = LeanPostgresSaver(pool)  # type: ignore[arg-type]
            saver.statements = statements
            saver.on_statements = on_statements
            # The saver serializes every query of the instance behind one lock, which only a
            # single shared connection needs; with a pool, runs write their checkpoints in
            # parallel.
            saver.lock = _NoLock()  # type: ignore[assignment]
            await setup_alone(conninfo, CHECKPOINTER_SETUP_LOCK, saver.setup)
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


async def delete_run_checkpoints(saver: BaseCheckpointSaver, thread_id: str, run_id: str) -> int:
    """Delete the checkpoints (and their writes) a run created, to roll the thread back."""
    ids = [
        item.config["configurable"]["checkpoint_id"]
        async for item in saver.alist(
            {"configurable": {"thread_id": thread_id}}, filter={"run_id": run_id}
        )
    ]
    if not ids:
        return 0
    conn: Any = getattr(saver, "conn", None)
    if hasattr(conn, "connection"):  # a psycopg pool: the PostgreSQL saver
        async with conn.connection() as pg:
            for table in ("checkpoint_writes", "checkpoints"):
                await pg.execute(
                    f"DELETE FROM {table} WHERE thread_id = %s AND checkpoint_id = ANY(%s)",
                    (thread_id, ids),
                )
        return len(ids)
    lock: Any = getattr(saver, "lock", None)
    marks = ",".join("?" for _ in ids)
    async with lock:
        for table in ("writes", "checkpoints"):
            await conn.execute(
                f"DELETE FROM {table} WHERE thread_id = ? AND checkpoint_id IN ({marks})",
                (thread_id, *ids),
            )
        await conn.commit()
    return len(ids)


def fenced(
    saver: BaseCheckpointSaver,
    holds: Callable[[], Awaitable[bool]],
    describe: str,
    recheck_seconds: float = 1.0,
    held_at: float = float("-inf"),
    empty: bool = False,
) -> BaseCheckpointSaver:
    """A view of `saver` whose writes are refused once the run's attempt is no longer current.

    The check costs one small query at most every `recheck_seconds`; a worker that was
    paused past its lease always re-checks (its monotonic clock moved on while paused).
    `held_at` is when the attempt was last known to hold the run (its claim, a moment
    before the lease was granted): no check is needed within `recheck_seconds` of it.

    `empty`: the thread had no checkpoint in its root namespace when the attempt took the
    run, and nobody else writes one while the run holds the thread. The view then answers
    its first read there (LangGraph's, before the run writes anything) without a query.
    """
    view = copy.copy(saver)
    get_tuple, put, put_writes = saver.aget_tuple, saver.aput, saver.aput_writes
    checked_at = held_at
    known_empty = empty

    async def aget_tuple(config: Any) -> Any:
        nonlocal known_empty
        if known_empty and not config["configurable"].get("checkpoint_ns"):
            known_empty = False
            return None
        return await get_tuple(config)

    async def ensure() -> None:
        nonlocal checked_at
        now = time.monotonic()
        if now - checked_at < recheck_seconds:
            return
        if not await holds():
            raise StaleAttemptError(f"{describe} is no longer current; checkpoint write refused")
        checked_at = now

    async def aput(config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        nonlocal known_empty
        known_empty = False
        await ensure()
        return await put(config, checkpoint, metadata, new_versions)

    async def aput_writes(config: Any, writes: Any, task_id: str, task_path: str = "") -> None:
        nonlocal known_empty
        known_empty = False
        await ensure()
        await put_writes(config, writes, task_id, task_path)

    view.aget_tuple = aget_tuple  # type: ignore[method-assign]
    view.aput = aput  # type: ignore[method-assign]
    view.aput_writes = aput_writes  # type: ignore[method-assign]
    return view
