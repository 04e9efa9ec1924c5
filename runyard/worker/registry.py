"""The attempts executing in this instance, so cancels, renewal and shutdown can reach them."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import TypeVar

from runyard.domain.status import StopReason

T = TypeVar("T")


@dataclass
class RunningRun:
    """One attempt held by this instance: its task, and why it was stopped, if it was."""

    run_id: str
    attempt: int
    task: asyncio.Task[None]
    # The thread had no checkpoint when this first attempt claimed the run (PostgreSQL).
    thread_empty: bool = False
    stop_reason: StopReason | None = None
    # The outcome is known and being written: a stop no longer cancels the task (the final
    # write is fenced, so a stale attempt's is refused anyway).
    finalizing: bool = False


class RunningRuns:
    """(run id, attempt) → the task executing that attempt here.

    Keyed by attempt as well: a stale attempt 1 unwinding here must not remove the entry
    of attempt 2 of the same run, claimed here meanwhile.
    """

    def __init__(self) -> None:
        self._runs: dict[tuple[str, int], RunningRun] = {}

    def add(
        self,
        run_id: str,
        attempt: int,
        task: asyncio.Task[None],
        thread_empty: bool = False,
    ) -> RunningRun:
        """Register a claimed attempt."""
        entry = RunningRun(run_id, attempt, task, thread_empty)
        self._runs[(run_id, attempt)] = entry
        return entry

    def remove(self, run_id: str, attempt: int) -> None:
        """Forget an attempt that ended here."""
        self._runs.pop((run_id, attempt), None)

    def stop(self, run_id: str, reason: StopReason) -> bool:
        """Cancel the run's attempts here with a reason (interrupt, rollback, release...)."""
        stopped = False
        for entry in self.all():
            if entry.run_id == run_id:
                stopped = self.stop_attempt(entry, reason) or stopped
        return stopped

    def stop_attempt(self, entry: RunningRun, reason: StopReason) -> bool:
        """Cancel one attempt's task with a reason, unless it ended or is finalizing."""
        if entry.task.done() or entry.finalizing:
            return False
        if entry.stop_reason is None:
            entry.stop_reason = reason
        entry.task.cancel()
        return True

    def all(self) -> list[RunningRun]:
        """Every attempt executing here."""
        return list(self._runs.values())

    def __len__(self) -> int:
        return len(self._runs)


async def carry_through_stops(entry: RunningRun, work: Awaitable[T]) -> T:
    """`work` carried to its end even if the attempt is stopped meanwhile: the stop's
    reason stays in `entry.stop_reason` for the caller to act on after. A cancellation
    that is no stop (the process ending) cancels `work` too."""
    inner = asyncio.ensure_future(work)
    while True:
        try:
            return await asyncio.shield(inner)
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if entry.stop_reason is None or task is None or inner.cancelled():
                inner.cancel()
                raise
            task.uncancel()


def absorb_stop(entry: RunningRun) -> StopReason | None:
    """Why this instance stopped the attempt, its cancellation of the current task withdrawn;
    None for a cancellation from elsewhere (shutdown, say), which the caller re-raises."""
    reason = entry.stop_reason
    task = asyncio.current_task()
    if reason is None or task is None:
        return None
    task.uncancel()
    return reason
