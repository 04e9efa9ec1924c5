"""Thread state use cases: read a checkpoint, history, update the state, refresh the thread row."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.errors import InvalidUpdateError
from langgraph.pregel import Pregel
from langgraph.store.base import BaseStore
from langgraph.types import Command, Send, StateSnapshot, StateUpdate
from sqlalchemy.ext.asyncio import AsyncConnection

from runyard.db import threads as threads_db
from runyard.db.engine import Sessions
from runyard.domain.errors import ConflictError, NotFoundError, RunyardError
from runyard.domain.status import ThreadStatus
from runyard.domain.thread import ThreadRecord
from runyard.encryption.encrypted_json import opened_thread, sealed_state
from runyard.graphs.factories import AccessContext
from runyard.graphs.registry import GraphRegistry
from runyard.graphs.serialize import to_jsonable
from runyard.graphs.state import (
    check_state_select,
    checkpoint_ref,
    empty_state,
    select_state,
    snapshot_to_state,
)
from runyard.lifecycle.machine import RunLifecycle
from runyard.schemas.threads import CheckpointConfig, StateCommand, Superstep
from runyard.streaming.broker import EventBroker
from runyard.streaming.thread_log import publish_state_update

if TYPE_CHECKING:
    from runyard.encryption.custom import CustomEncryption

log = logging.getLogger("runyard.threads")


def thread_not_found(thread_id: str) -> NotFoundError:
    """The error for a thread id that names no thread."""
    return NotFoundError(f"thread {thread_id} not found; create it with POST /threads first")


def no_graph_error(thread_id: str) -> RunyardError:
    """The error for a state update on a thread no graph was ever bound to (400, as LangGraph)."""
    return RunyardError(
        f"thread {thread_id} has no graph yet, so its state cannot be updated; run it once, "
        "or create it with a graph_id (or set metadata.graph_id with PATCH /threads/{id})"
    )


def checkpoint_config(thread_id: str, checkpoint: CheckpointConfig | None = None) -> RunnableConfig:
    """The LangGraph config addressing a thread's checkpoint (latest when no id is given)."""
    configurable: dict[str, Any] = {"thread_id": thread_id, "checkpoint_ns": ""}
    if checkpoint is not None:
        given = checkpoint.model_dump(exclude_none=True, exclude={"thread_id"})
        configurable.update(given)
    return RunnableConfig(configurable=configurable)


def _command(command: StateCommand) -> Command[Any]:
    goto = command.goto
    if goto is not None:
        targets = goto if isinstance(goto, list) else [goto]
        goto = [
            Send(target["node"], target.get("input")) if isinstance(target, dict) else target
            for target in targets
        ]
    update = command.update
    if isinstance(update, list) and all(
        isinstance(item, list) and len(item) == 2 and isinstance(item[0], str) for item in update
    ):
        # JSON has no tuples: [["key", value], ...] means a list of (channel, value) writes.
        update = [tuple(item) for item in update]
    return Command(update=update, resume=command.resume, goto=goto or ())


def _checkpoint_not_found(thread_id: str, checkpoint_id: str) -> NotFoundError:
    return NotFoundError(
        f"checkpoint {checkpoint_id} not found on thread {thread_id}; "
        f"list its checkpoints with POST /threads/{thread_id}/history"
    )


class ThreadStateService:
    """A thread's state: its checkpoints read and written through its graph."""

    def __init__(
        self,
        graphs: GraphRegistry,
        store: BaseStore,
        checkpointer: BaseCheckpointSaver,
        sessions: Sessions,
        autocommit: Sessions,
        lifecycle: RunLifecycle,
        broker: EventBroker,
        encryption: CustomEncryption | None,
    ) -> None:
        self.graphs = graphs
        self.store = store
        self.checkpointer = checkpointer
        self.sessions = sessions
        self.autocommit = autocommit
        self.lifecycle = lifecycle
        self.broker = broker
        self.encryption = encryption

    async def bound_graph(
        self,
        graph_id: str,
        thread_id: str,
        thread_config: dict[str, Any] | None = None,
        access_context: AccessContext = "threads.read",
    ) -> Pregel:
        """The thread's graph, built for it and bound to the server's checkpointer.

        `access_context` tells a factory why (`threads.read`, or `threads.update` to write state).
        """
        configurable = dict((thread_config or {}).get("configurable") or {})
        config = {"configurable": {**configurable, "thread_id": thread_id, "graph_id": graph_id}}
        graph = await self.graphs.get(graph_id).build(config, access_context, self.store)
        return graph.copy(update={"checkpointer": self.checkpointer})

    async def refresh_thread_from_checkpoint(
        self,
        session: AsyncConnection,
        thread_id: str,
        graph: Pregel,
        *,
        status: ThreadStatus | None = None,
        error: Any = None,
    ) -> StateSnapshot:
        """Copy the latest checkpoint's values and interrupts onto the thread row.

        The status is `status` when given, else `interrupted` while the checkpoint has next
        tasks (an interrupt() or interrupt_before left work pending, as LangGraph Platform
        decides it) and `idle` otherwise. `graph` must be bound to the checkpointer.
        """
        snapshot = await graph.aget_state(checkpoint_config(thread_id))
        has_checkpoint = snapshot.created_at is not None
        interrupts = {
            task.id: to_jsonable(list(task.interrupts))
            for task in snapshot.tasks
            if task.interrupts
        }
        if status is None:
            status = ThreadStatus.INTERRUPTED if snapshot.next else ThreadStatus.IDLE
        values = to_jsonable(snapshot.values) if has_checkpoint else None
        state = await sealed_state(
            self, threads_db.ThreadState(thread_id, status.value, values, interrupts, error)
        )
        await self.lifecycle.record_thread_state(session, state)
        return snapshot

    async def get_state(
        self,
        thread_id: str,
        *,
        checkpoint: CheckpointConfig | None = None,
        subgraphs: bool = False,
        select: list[str] | None = None,
    ) -> dict[str, Any]:
        """The thread's state at a checkpoint (the latest when none is named), or its
        selected fields."""
        select = check_state_select(select)
        return select_state(await self._state(thread_id, checkpoint, subgraphs), select)

    async def _state(
        self, thread_id: str, checkpoint: CheckpointConfig | None, subgraphs: bool
    ) -> dict[str, Any]:
        thread = await self._read_thread(thread_id)
        wanted = checkpoint.checkpoint_id if checkpoint is not None else None
        graph_id = (thread.metadata or {}).get("graph_id")
        if not graph_id:
            if wanted:
                raise _checkpoint_not_found(thread_id, wanted)
            return empty_state(thread_id)
        graph = await self.bound_graph(graph_id, thread_id, thread.config)
        try:
            snapshot = await graph.aget_state(
                checkpoint_config(thread_id, checkpoint), subgraphs=subgraphs
            )
        except ValueError as exc:
            # LangGraph raises ValueError for a checkpoint_ns that names no subgraph.
            raise NotFoundError(f"no state at {checkpoint} on thread {thread_id}: {exc}") from exc
        if snapshot.created_at is None:
            if wanted:
                raise _checkpoint_not_found(thread_id, wanted)
            return empty_state(thread_id)
        return snapshot_to_state(snapshot)

    async def get_history(
        self,
        thread_id: str,
        *,
        limit: int = 10,
        before: str | CheckpointConfig | None = None,
        metadata: dict[str, Any] | None = None,
        checkpoint: CheckpointConfig | None = None,
        select: list[str] | None = None,
    ) -> list[dict[str, Any]]:
        """The thread's past states, newest first; empty for a thread that never ran."""
        select = check_state_select(select)
        thread = await self._read_thread(thread_id)
        graph_id = (thread.metadata or {}).get("graph_id")
        if not graph_id:
            return []
        graph = await self.bound_graph(graph_id, thread_id, thread.config)
        if isinstance(before, str):
            before_config: RunnableConfig | None = RunnableConfig(
                configurable={"checkpoint_id": before}
            )
        elif before is not None and before.checkpoint_id:
            before_config = RunnableConfig(configurable=before.model_dump(exclude_none=True))
        else:
            before_config = None
        states = graph.aget_state_history(
            checkpoint_config(thread_id, checkpoint),
            filter=metadata or None,
            before=before_config,
            limit=limit,
        )
        return [select_state(snapshot_to_state(snapshot), select) async for snapshot in states]

    async def update_state(
        self,
        thread_id: str,
        values: Any,
        *,
        as_node: str | None = None,
        checkpoint: CheckpointConfig | None = None,
        checkpoint_id: str | None = None,
    ) -> dict[str, Any]:
        """Write a new checkpoint as if `as_node` had returned `values`; refresh the thread row.

        The update forks from `checkpoint` (or the deprecated `checkpoint_id`) when given,
        else from the latest checkpoint.
        """
        if checkpoint_id and (checkpoint is None or not checkpoint.checkpoint_id):
            base = checkpoint.model_dump(exclude_none=True) if checkpoint else {}
            checkpoint = CheckpointConfig(**{**base, "checkpoint_id": checkpoint_id})
        async with self.sessions() as session, session.begin():
            # Locked so a run created meanwhile waits for this update (PostgreSQL).
            thread = await threads_db.get_thread(session, thread_id, lock=True)
            if thread is None:
                raise thread_not_found(thread_id)
            graph_id = (thread.metadata or {}).get("graph_id")
            if not graph_id:
                raise no_graph_error(thread_id)
            if await threads_db.has_active_runs(session, thread_id):
                raise ConflictError(
                    f"thread {thread_id} has a pending or running run; wait for it to finish "
                    "(or cancel it) before updating its state"
                )
            thread_config = (await opened_thread(self, thread, ("config",))).config
            graph = await self.bound_graph(graph_id, thread_id, thread_config, "threads.update")
            config = checkpoint_config(thread_id, checkpoint)
            wanted = config["configurable"].get("checkpoint_id")
            if wanted and await self.checkpointer.aget_tuple(config) is None:
                raise _checkpoint_not_found(thread_id, wanted)
            try:
                written = await graph.aupdate_state(config, values, as_node=as_node)
            except (InvalidUpdateError, ValueError, TypeError, OverflowError) as exc:
                # TypeError/OverflowError: a value the checkpoint serializer cannot store
                # (an integer beyond 64 bits, for one).
                raise RunyardError(f"cannot update the state of thread {thread_id}: {exc}") from exc
            snapshot = await self.refresh_thread_from_checkpoint(session, thread_id, graph)
        await publish_state_update(self.broker, thread_id, snapshot_to_state(snapshot))
        log.info("thread_state_updated thread_id=%s as_node=%s", thread_id, as_node)
        return {"checkpoint": checkpoint_ref(written)}

    async def apply_supersteps(
        self,
        session: AsyncConnection,
        thread_id: str,
        graph_id: str,
        supersteps: Sequence[Superstep],
    ) -> None:
        """Apply supersteps of updates to a new thread's checkpoints and refresh its row."""
        graph = await self.bound_graph(graph_id, thread_id, access_context="threads.update")
        steps = [
            [
                StateUpdate(
                    _command(update.command) if update.command else update.values,  # type: ignore[arg-type]
                    update.as_node,
                )
                for update in step.updates
            ]
            for step in supersteps
        ]
        try:
            await graph.abulk_update_state(checkpoint_config(thread_id), steps)
        except (InvalidUpdateError, ValueError, TypeError, OverflowError) as exc:
            raise RunyardError(f"cannot apply the supersteps to thread {thread_id}: {exc}") from exc
        await self.refresh_thread_from_checkpoint(session, thread_id, graph)

    async def _read_thread(self, thread_id: str) -> ThreadRecord:
        async with self.autocommit() as session:
            thread = await threads_db.get_thread(session, thread_id)
        if thread is None:
            raise thread_not_found(thread_id)
        return await opened_thread(self, thread, ("metadata", "config"))
