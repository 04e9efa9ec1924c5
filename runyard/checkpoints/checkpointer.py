"""LangGraph checkpoint savers per backend, and the thread-level operations they lack."""

from __future__ import annotations

import asyncio
import copy
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from langgraph.checkpoint.base import BaseCheckpointSaver

from runyard.db.conninfo import libpq_url
from runyard.db.driver import StatementPool
from runyard.db.faults import retry_while_store_unavailable
from runyard.db.setup_lock import CHECKPOINTER_SETUP_LOCK, setup_alone

if TYPE_CHECKING:
    from runyard.encryption.at_rest import AtRest
    from runyard.encryption.custom import CustomEncryption

log = logging.getLogger("runyard.checkpointer")


@asynccontextmanager
async def open_checkpointer(
    database_url: str,
    data_dir: Path,
    on_statements: Callable[[int], None] | None = None,
    pool_size: int = 10,
    statements: StatementPool | None = None,
    at_rest: AtRest | None = None,
    custom: CustomEncryption | None = None,
) -> AsyncIterator[BaseCheckpointSaver]:
    """The saver matching the database: PostgreSQL or a SQLite file.

    The PostgreSQL saver (runyard/checkpoints/pg_saver.py) sends a run's statements through
    Runyard's statement pool, `statements`, and opens the library's saver, with a psycopg
    pool of at most `pool_size` connections, only when something else is asked of it.
    `on_statements(n)` is told of the statements it sends. `at_rest`: checkpoints,
    writes and the configured keys of their metadata are encrypted. `custom`: the blob
    handlers of `encryption.path` encrypt checkpoints and writes, its JSON handlers their
    metadata (never beside `at_rest`).
    """
    custom_serde = custom.serde() if custom else None
    serde = at_rest.serde() if at_rest else custom_serde
    json_codec: Any = at_rest.json if at_rest else None
    if custom is not None:
        json_codec = custom.metadata_codec()
    if database_url.startswith("postgresql"):
        from runyard.checkpoints.pg_saver import PostgresSaver

        if statements is None:
            raise ValueError("the PostgreSQL checkpointer needs Runyard's statement pool")
        conninfo = libpq_url(database_url)
        saver = PostgresSaver(statements, conninfo, pool_size, on_statements, serde, json_codec)
        if custom is not None:
            # Every channel value a blob the handlers encrypt: none inline in the row's JSON.
            saver.inline = ()
            if json_codec is not None:
                saver.metadata_read = json_codec.decrypt
        try:
            await setup_alone(conninfo, CHECKPOINTER_SETUP_LOCK, saver.setup)
            yield saver
        finally:
            await saver.close()
    else:
        from runyard.checkpoints.sqlite_saver import SqliteSaver
        from runyard.db.sqlite_checkpoints import open_sqlite

        data_dir.mkdir(parents=True, exist_ok=True)
        conn = await open_sqlite(data_dir / "checkpoints.sqlite")
        try:
            sqlite_saver = SqliteSaver(conn, serde=serde)
            sqlite_saver.json_codec = json_codec
            # The runs' database: a run's checkpoint writes are fenced by its row there.
            await sqlite_saver.attach_runs(Path(database_url.split(":///", 1)[1]))
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
    if not isinstance(saver, CheckpointDeleting):
        raise TypeError(f"{type(saver).__name__} cannot delete single checkpoints")
    await saver.adelete_checkpoints(thread_id, ids)
    return len(ids)


@runtime_checkable
class CheckpointDeleting(Protocol):
    """A saver that deletes single checkpoints of a thread (both of Runyard's do)."""

    async def adelete_checkpoints(self, thread_id: str, checkpoint_ids: Sequence[str]) -> None:
        """Delete these checkpoints of the thread and their writes."""
        ...


@runtime_checkable
class StorageReporting(Protocol):
    """A saver that reports what a thread's checkpoints occupy (both of Runyard's do)."""

    async def athread_storage(self, thread_id: str) -> dict[str, Any]:
        """Counts and bytes of the thread's checkpoints, channel values and pending writes."""
        ...


@runtime_checkable
class FencedSaver(Protocol):
    """A saver that can make a copy of itself whose writes are fenced by a run's attempt."""

    def fenced_to(self, run_id: str, attempt: int) -> BaseCheckpointSaver:
        """The copy: each write is made only while `attempt` holds the run, checked in the
        write's own statement, and raises StaleAttemptError otherwise."""
        ...


def fenced(
    saver: BaseCheckpointSaver, run_id: str, attempt: int, empty: bool = False
) -> BaseCheckpointSaver:
    """A view of `saver` whose writes are refused once `attempt` no longer holds the run.

    The check is part of each write's statement (`fenced_to` of the PostgreSQL and SQLite
    savers), never a check before it: an attempt that lost the run writes nothing, however
    recently it held it.

    `empty`: the thread had no checkpoint in its root namespace when the attempt took the
    run, and nobody else writes one while the run holds the thread. The view then answers
    its first read there (LangGraph's, before the run writes anything) without a query.
    """
    if not isinstance(saver, FencedSaver):
        raise TypeError(f"{type(saver).__name__} cannot fence its writes by a run's attempt")
    view = saver.fenced_to(run_id, attempt)
    if not empty:
        return view
    get_tuple, put, put_writes = view.aget_tuple, view.aput, view.aput_writes
    known_empty = True

    async def aget_tuple(config: Any) -> Any:
        nonlocal known_empty
        if known_empty and not config["configurable"].get("checkpoint_ns"):
            known_empty = False
            return None
        return await get_tuple(config)

    async def aput(config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        nonlocal known_empty
        known_empty = False
        return await put(config, checkpoint, metadata, new_versions)

    async def aput_writes(config: Any, writes: Any, task_id: str, task_path: str = "") -> None:
        nonlocal known_empty
        known_empty = False
        await put_writes(config, writes, task_id, task_path)

    view.aget_tuple = aget_tuple  # type: ignore[method-assign]
    view.aput = aput  # type: ignore[method-assign]
    view.aput_writes = aput_writes  # type: ignore[method-assign]
    return view


# LangGraph's pending-write channel for a task's error (its checkpoint format).
ERROR_CHANNEL = "__error__"


def storing_no_stopped_tasks(saver: BaseCheckpointSaver) -> BaseCheckpointSaver:
    """A view of `saver` that stores nothing of a task the attempt's stop cancelled.

    LangGraph stores a cancelled task's writes with the cancellation as the task's error.
    When the cancel lands after the node returned but before its edges were taken, those
    writes hold the node's output and that error, and a resume from them finds nothing to
    run: the run would end `success` with its work undone. Without them the task simply
    has not run, and the attempt that resumes the run runs it again.
    """
    view = copy.copy(saver)
    put_writes = saver.aput_writes

    async def aput_writes(config: Any, writes: Any, task_id: str, task_path: str = "") -> None:
        if any(
            channel == ERROR_CHANNEL and isinstance(value, asyncio.CancelledError)
            for channel, value in writes
        ):
            return
        await put_writes(config, writes, task_id, task_path)

    view.aput_writes = aput_writes  # type: ignore[method-assign]
    return view


def riding_out_store_faults(
    saver: BaseCheckpointSaver, budget_seconds: float
) -> BaseCheckpointSaver:
    """A view of `saver` whose reads and writes are tried again while the database is
    unreachable (a restart, a killed connection), for up to `budget_seconds` each.

    A step whose checkpoint cannot be written is otherwise lost with the attempt, and runs
    again when the run resumes: its side effects twice. The writes are upserts keyed by
    checkpoint and task, so sending one again is harmless.
    """
    view = copy.copy(saver)
    get_tuple, put, put_writes = saver.aget_tuple, saver.aput, saver.aput_writes

    async def again(call: Callable[[], Awaitable[Any]]) -> Any:
        return await retry_while_store_unavailable(
            call, budget_seconds, "checkpoint_store_unavailable_retrying"
        )

    async def aget_tuple(config: Any) -> Any:
        return await again(lambda: get_tuple(config))

    async def aput(config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        return await again(lambda: put(config, checkpoint, metadata, new_versions))

    async def aput_writes(config: Any, writes: Any, task_id: str, task_path: str = "") -> None:
        await again(lambda: put_writes(config, writes, task_id, task_path))

    view.aget_tuple = aget_tuple  # type: ignore[method-assign]
    view.aput = aput  # type: ignore[method-assign]
    view.aput_writes = aput_writes  # type: ignore[method-assign]
    return view
