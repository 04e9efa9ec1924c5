"""The one place an attempt's outcome is recorded: status, output, thread state; then the
run ends as every run does (runyard/worker/ending.py)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from langgraph.pregel import Pregel

from runyard.db import runs as runs_db
from runyard.db import threads as threads_db
from runyard.db.threads import ThreadState
from runyard.domain.results import with_interrupts
from runyard.domain.status import RunStatus, ThreadStatus
from runyard.graphs.checkpointer import delete_run_checkpoints
from runyard.graphs.serialize import to_jsonable

if TYPE_CHECKING:
    from runyard.runtime import Runtime

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
    `snapshot` the thread's state when the run's own stream already told it.
    """

    status: RunStatus
    error: dict[str, Any] | None = None
    rollback: bool = False
    graph: Pregel | None = None
    snapshot: ThreadSnapshot | None = None


async def read_thread_snapshot(
    runtime: Runtime, graph_id: str, thread_id: str, graph: Pregel | None = None
) -> ThreadSnapshot:
    """Values, pending interrupts (task id → list) and `next` from the thread's checkpoint.

    `graph`, when given, is used as it is (it must have a checkpointer); otherwise the
    graph is built.
    """
    if graph is None:
        built = await runtime.graphs.get(graph_id).build({}, "threads.read", runtime.store)
        graph = built.copy(update={"checkpointer": runtime.checkpointer})
    state = await graph.aget_state({"configurable": {"thread_id": thread_id}})
    interrupts = {
        task.id: to_jsonable(list(task.interrupts)) for task in state.tasks if task.interrupts
    }
    return ThreadSnapshot(to_jsonable(state.values), interrupts, bool(state.next))


async def finalize_run(
    runtime: Runtime, run: dict[str, Any], attempt: int, outcome: Outcome
) -> bool:
    """Record the outcome if `attempt` still holds the run, then end the run (wake-ups,
    next run, webhook, temporary thread) through `runtime.run_endings`."""
    run_id, thread_id = run["run_id"], run["thread_id"]
    kwargs = run["kwargs"]
    finished: runs_db.Finished | None = None
    if outcome.rollback:
        snapshot = await _record_rollback(runtime, run, attempt, outcome)
        if snapshot is None:
            return False
    else:
        snapshot = outcome.snapshot or await read_thread_snapshot(
            runtime, kwargs["graph_id"], thread_id, outcome.graph
        )
        output = _result(snapshot) if outcome.status == RunStatus.SUCCESS else None
        state = _thread_state(thread_id, outcome, snapshot)
        async with runtime.atomic() as session:
            finished = await runs_db.finish_run_with_state(
                session, run_id, attempt, outcome.status, output, outcome.error, state
            )
        if not finished.held:
            log.warning("run_finalize_refused run_id=%s attempt=%s", run_id, attempt)
            return False
        if not finished.thread_written:
            # A run was committed on the thread while this one ended: write with a fresh view.
            async with runtime.autocommit() as session:
                await threads_db.set_state_fields(session, state, busy_if_pending=True)
    await runtime.run_endings.end(
        run,
        outcome.status,
        error=outcome.error,
        attempt=attempt,
        values=snapshot.values,
        finished=finished,
    )
    return True


async def _record_rollback(
    runtime: Runtime, run: dict[str, Any], attempt: int, outcome: Outcome
) -> ThreadSnapshot | None:
    """End a rolled-back run: its checkpoints go, then the row, in a fenced write.

    The run holds its thread (it is still `running`) until the final write, so no run
    queued behind it can start from the checkpoints being removed. Only an attempt that
    still holds the run removes them: it checks just before; None when it does not hold
    the run (then, or at the final write).
    """
    run_id, thread_id = run["run_id"], run["thread_id"]
    async with runtime.autocommit() as session:
        holds = await runs_db.still_holds(session, run_id, attempt)
    if holds:
        await delete_run_checkpoints(runtime.checkpointer, thread_id, run_id)
        snapshot = await read_thread_snapshot(
            runtime, run["kwargs"]["graph_id"], thread_id, outcome.graph
        )
        async with runtime.sessions() as session, session.begin():
            held = await runs_db.finish_run(session, run_id, attempt, outcome.status, None, None)
            if held:
                await runs_db.delete_run(session, run_id)
                state = _thread_state(thread_id, outcome, snapshot)
                await threads_db.set_state_fields(session, state, busy_if_pending=True)
                return snapshot
    log.warning("run_finalize_refused run_id=%s attempt=%s", run_id, attempt)
    return None


def _thread_state(thread_id: str, outcome: Outcome, snapshot: ThreadSnapshot) -> ThreadState:
    failed = outcome.status in (RunStatus.ERROR, RunStatus.TIMEOUT)
    return ThreadState(
        thread_id,
        _thread_status(outcome, snapshot),
        snapshot.values,
        snapshot.interrupts,
        outcome.error if failed else None,
    )


def _result(snapshot: ThreadSnapshot) -> Any:
    """What /join and /wait answer for a successful run: the values, with its interrupts."""
    interrupts = [item for items in snapshot.interrupts.values() for item in items]
    return with_interrupts(snapshot.values, interrupts)


def _thread_status(outcome: Outcome, snapshot: ThreadSnapshot) -> str:
    """The thread's status after the run, unless another run is pending (then busy)."""
    if outcome.status in (RunStatus.ERROR, RunStatus.TIMEOUT):
        return ThreadStatus.ERROR.value
    if snapshot.interrupts or snapshot.has_next:
        return ThreadStatus.INTERRUPTED.value
    return ThreadStatus.IDLE.value
