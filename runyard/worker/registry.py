"""The runs executing in this instance, so cancels and shutdown can reach their tasks."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass


@dataclass
class RunningRun:
    """One run held by this instance: its task, attempt and why it was stopped, if it was."""

    run_id: str
    attempt: int
    task: asyncio.Task[None]
    # Monotonic time at which the attempt was last known to hold the run (its claim).
    held_at: float = float("-inf")
    # The thread had no checkpoint when this first attempt claimed the run (PostgreSQL).
    thread_empty: bool = False
    stop_reason: str | None = None


class RunningRuns:
    """Run id → the task executing it here."""

    def __init__(self) -> None:
        self._runs: dict[str, RunningRun] = {}

    def add(
        self,
        run_id: str,
        attempt: int,
        task: asyncio.Task[None],
        held_at: float = float("-inf"),
        thread_empty: bool = False,
    ) -> RunningRun:
        """Register a claimed run."""
        entry = self._runs[run_id] = RunningRun(run_id, attempt, task, held_at, thread_empty)
        return entry

    def remove(self, run_id: str) -> None:
        """Forget a run that ended here."""
        self._runs.pop(run_id, None)

    def get(self, run_id: str) -> RunningRun | None:
        """The entry of a run executing here."""
        return self._runs.get(run_id)

    def stop(self, run_id: str, reason: str) -> bool:
        """Cancel the run's task with a reason (interrupt, rollback, release, stale...)."""
        entry = self._runs.get(run_id)
        if entry is None or entry.task.done():
            return False
        if entry.stop_reason is None:
            entry.stop_reason = reason
        entry.task.cancel()
        return True

    def all(self) -> list[RunningRun]:
        """Every run executing here."""
        return list(self._runs.values())

    def __len__(self) -> int:
        return len(self._runs)
