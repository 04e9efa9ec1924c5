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


class MultitaskStrategy(StrEnum):
    """What to do with a new run on a thread that already has an active run."""

    REJECT = "reject"
    ENQUEUE = "enqueue"
    INTERRUPT = "interrupt"
    ROLLBACK = "rollback"


class CancelAction(StrEnum):
    """How a cancelled run is left: interrupted, or deleted with its checkpoints."""

    INTERRUPT = "interrupt"
    ROLLBACK = "rollback"


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
