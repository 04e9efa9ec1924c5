"""Run and thread statuses, and the sets of them, each defined once."""

from __future__ import annotations

from enum import StrEnum


class RunStatus(StrEnum):
    """Lifecycle of a run, as the Agent Protocol names it."""

    PENDING = "pending"
    RUNNING = "running"
    SUCCESS = "success"
    ERROR = "error"
    TIMEOUT = "timeout"
    INTERRUPTED = "interrupted"


class ThreadStatus(StrEnum):
    """Status of a thread, derived from its latest run and checkpoint."""

    IDLE = "idle"
    BUSY = "busy"
    INTERRUPTED = "interrupted"
    ERROR = "error"


class CancelAction(StrEnum):
    """How a cancelled run is left: interrupted, or deleted with its checkpoints.

    Declared weakest first: each stop is stronger than the ones above it (how two stops on
    one run compose is runyard/lifecycle/stops.py's rule).
    """

    INTERRUPT = "interrupt"
    ROLLBACK = "rollback"

    @property
    def strength(self) -> int:
        """1 for the weakest stop, one more for each stronger one."""
        return list(CancelAction).index(self) + 1


class MultitaskStrategy(StrEnum):
    """What to do with a new run on a thread that already has an active run."""

    REJECT = "reject"
    ENQUEUE = "enqueue"
    INTERRUPT = "interrupt"
    ROLLBACK = "rollback"

    # What each strategy does to the thread's active runs is the lifecycle's rule
    # (`STRATEGY_STOPS`, runyard/lifecycle/stops.py), the one place that knows it.


class StandDown(StrEnum):
    """Why an instance stops an attempt of its own that no cancel asked to stop."""

    # Shutdown: the run goes back to pending for another instance.
    RELEASE = "release"
    # The attempt lost the run (its lease, or a newer attempt): it writes nothing more.
    STALE = "stale"


# Why an attempt executing here was stopped: a cancel's action, or the instance's own reason.
StopReason = CancelAction | StandDown


ACTIVE_RUN_STATUSES: frozenset[RunStatus] = frozenset({RunStatus.PENDING, RunStatus.RUNNING})
TERMINAL_RUN_STATUSES: frozenset[RunStatus] = frozenset(
    {RunStatus.SUCCESS, RunStatus.ERROR, RunStatus.TIMEOUT, RunStatus.INTERRUPTED}
)


def thread_status_after(run_status: RunStatus, has_pending_interrupts: bool) -> ThreadStatus:
    """The thread status a finished run leaves behind."""
    if run_status in (RunStatus.ERROR, RunStatus.TIMEOUT):
        return ThreadStatus.ERROR
    if has_pending_interrupts:
        return ThreadStatus.INTERRUPTED
    return ThreadStatus.IDLE


class DeliveryStatus(StrEnum):
    """Where a webhook delivery stands: owed (pending), or its one final outcome."""

    PENDING = "pending"
    DELIVERED = "delivered"
    FAILED = "failed"
    REFUSED = "refused"
