"""What an attempt's outcome records: status, output and the thread's state read from its
checkpoint; the lifecycle (runyard/lifecycle/machine.py) writes it and ends the run."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from langgraph.pregel import Pregel

from runyard.checkpoints.checkpointer import delete_run_checkpoints
from runyard.db import run_attempts as attempts_db
from runyard.db.threads import ThreadState
from runyard.domain.results import with_interrupts
from runyard.domain.run import RunRecord
from runyard.domain.status import CancelAction, RunStatus, thread_status_after
from runyard.encryption.encrypted_json import sealed, sealed_state
from runyard.graphs.serialize import to_jsonable
from runyard.lifecycle.final_writes import FinalWrite

if TYPE_CHECKING:
    from langgraph.checkpoint.base import BaseCheckpointSaver
    from langgraph.store.base import BaseStore

    from runyard.db.engine import Sessions
    from runyard.encryption.custom import CustomEncryption
    from runyard.graphs.registry import GraphRegistry
    from runyard.lifecycle.machine import RunLifecycle

log = logging.getLogger("runyard.worker")


@dataclass
class ThreadSnapshot:
    """What the thread row stores after a run: latest values, interrupts, whether it paused."""

    values: Any
    interrupts: dict[str, Any]
    has_next: bool


@dataclass
class Outcome:
    """How a run's execution ended.

    `graph` is the graph the run executed (bound to a checkpointer), if it was built;
    `snapshot` the thread's state when the run's own stream already told it; `stop` the stop
    this end carries out (a cancel's), None for the run's own end.
    """

    status: RunStatus
    error: dict[str, Any] | None = None
    graph: Pregel | None = None
    snapshot: ThreadSnapshot | None = None
    stop: CancelAction | None = None

    @property
    def rollback(self) -> bool:
        """True when the run ends rolled back: deleted, with its checkpoints."""
        return self.stop is CancelAction.ROLLBACK


class RunFinalizer:
    """Records attempts' outcomes and ends their runs through the lifecycle; built from the
    lifecycle, the sessions, the graphs with their checkpointer and store, and the custom
    encryption (`encryption.path`, None when not set)."""

    def __init__(
        self,
        lifecycle: RunLifecycle,
        autocommit: Sessions,
        graphs: GraphRegistry,
        checkpointer: BaseCheckpointSaver,
        store: BaseStore,
        encryption: CustomEncryption | None,
    ) -> None:
        self._lifecycle = lifecycle
        self._autocommit = autocommit
        self._graphs = graphs
        self._checkpointer = checkpointer
        self._store = store
        self.encryption = encryption

    async def read_snapshot(
        self, graph_id: str, thread_id: str, graph: Pregel | None = None
    ) -> ThreadSnapshot:
        """Values, pending interrupts (task id → list) and `next` from the thread's checkpoint.

        `graph`, when given, is used as it is (it must have a checkpointer); otherwise the
        graph is built.
        """
        if graph is None:
            built = await self._graphs.get(graph_id).build({}, "threads.read", self._store)
            graph = built.copy(update={"checkpointer": self._checkpointer})
        state = await graph.aget_state({"configurable": {"thread_id": thread_id}})
        interrupts = {
            task.id: to_jsonable(list(task.interrupts)) for task in state.tasks if task.interrupts
        }
        return ThreadSnapshot(to_jsonable(state.values), interrupts, bool(state.next))

    async def finalize(self, run: RunRecord, attempt: int, outcome: Outcome) -> bool:
        """Record the outcome if `attempt` still holds the run, then end the run (wake-ups,
        next run, webhook, temporary thread): both through the lifecycle.

        A stop stronger than the one the outcome carries out, recorded first, overrules it:
        the run ends as that stop asks instead. Each overruling stop is stronger than the
        last, so this ends after at most one round per CancelAction.
        """
        if outcome.rollback:
            return await self._finalize_rolled_back(run, attempt, outcome)
        snapshot = outcome.snapshot or await self.read_snapshot(
            run.request.graph_id, run.thread_id, outcome.graph
        )
        written = await self._finish(run, attempt, outcome, snapshot)
        while written.stop is not None:
            outcome = cancelled(written.stop, outcome.graph, snapshot)
            if outcome.rollback:
                return await self._finalize_rolled_back(run, attempt, outcome)
            written = await self._finish(run, attempt, outcome, snapshot)
        return written.done

    async def _finish(
        self, run: RunRecord, attempt: int, outcome: Outcome, snapshot: ThreadSnapshot
    ) -> FinalWrite:
        """The outcome's final write (sealed as encryption.path asks), through the lifecycle."""
        thread_id = run.thread_id
        output = _result(snapshot) if outcome.status == RunStatus.SUCCESS else None
        if isinstance(output, dict):
            output = await sealed(self, "run", "output", output)
        state = await sealed_state(self, _thread_state(thread_id, outcome, snapshot))
        error = outcome.error
        if isinstance(error, dict):
            error = await sealed(self, "run", "error", error)
        return await self._lifecycle.finish(
            run,
            attempt,
            outcome.status,
            output,
            outcome.error,
            state,
            stored_error=error,
            stop=outcome.stop,
        )

    async def _finalize_rolled_back(self, run: RunRecord, attempt: int, outcome: Outcome) -> bool:
        snapshot = await self._rolled_back_snapshot(run, attempt, outcome)
        if snapshot is None:
            return False
        state = await sealed_state(self, _thread_state(run.thread_id, outcome, snapshot))
        ended = await self._lifecycle.finish_rolled_back(
            run, attempt, outcome.status, state, outcome.error
        )
        if not ended:
            log.warning("run_finalize_refused run_id=%s attempt=%s", run.run_id, attempt)
            return False
        await self._lifecycle.end(run, outcome.status, error=outcome.error, attempt=attempt)
        return True

    async def _rolled_back_snapshot(
        self, run: RunRecord, attempt: int, outcome: Outcome
    ) -> ThreadSnapshot | None:
        """Before a rolled-back run's end is written: its checkpoints go, and the thread's
        state is read without them.

        The run holds its thread (it is still `running`) until the final write, so no run
        queued behind it can start from the checkpoints being removed. Only an attempt that
        still holds the run removes them: it checks just before; None when it does not.
        """
        run_id, thread_id = run.run_id, run.thread_id
        async with self._autocommit() as session:
            holds = await attempts_db.still_holds(session, run_id, attempt)
        if not holds:
            log.warning("run_finalize_refused run_id=%s attempt=%s", run_id, attempt)
            return None
        await delete_run_checkpoints(self._checkpointer, thread_id, run_id)
        return await self.read_snapshot(run.request.graph_id, thread_id, outcome.graph)


def cancelled(
    stop: CancelAction, graph: Pregel | None, snapshot: ThreadSnapshot | None = None
) -> Outcome:
    """How a run stopped by a cancel ends: `interrupted`, its changes gone for `rollback`."""
    if stop is CancelAction.ROLLBACK:
        return Outcome(RunStatus.INTERRUPTED, graph=graph, stop=stop)
    return Outcome(RunStatus.INTERRUPTED, graph=graph, snapshot=snapshot, stop=stop)


def _thread_state(thread_id: str, outcome: Outcome, snapshot: ThreadSnapshot) -> ThreadState:
    failed = outcome.status in (RunStatus.ERROR, RunStatus.TIMEOUT)
    # The thread's status after the run, unless another run is pending (then busy).
    paused = bool(snapshot.interrupts or snapshot.has_next)
    return ThreadState(
        thread_id,
        thread_status_after(outcome.status, paused),
        snapshot.values,
        snapshot.interrupts,
        outcome.error if failed else None,
    )


def _result(snapshot: ThreadSnapshot) -> Any:
    """What /join and /wait answer for a successful run: the values, with its interrupts."""
    interrupts = [item for items in snapshot.interrupts.values() for item in items]
    return with_interrupts(snapshot.values, interrupts)
