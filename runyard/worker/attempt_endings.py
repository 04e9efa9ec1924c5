"""How an attempt ends short of its graph's own end: a stop (a cancel, a drain's release, a
stand-down), an error of the graph, or a store outage or fault that hands the run back to the
queue (the last attempt a fault allows fails the run). Each gives the outcome the execution
path (runyard/worker/execute.py) finalizes, or None when the attempt has nothing to write."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

from langgraph.pregel import Pregel

from runyard.db.faults import retry_while_store_unavailable, store_fault, store_unavailable
from runyard.domain.errors import DecryptionError
from runyard.domain.run import RunRecord
from runyard.domain.status import CancelAction, RunStatus, StandDown, StopReason
from runyard.lifecycle.final_writes import FinalWrite
from runyard.lifecycle.machine import RunLifecycle
from runyard.queue.run_queue import RunQueue
from runyard.settings import Settings
from runyard.worker.finalize import Outcome, ThreadSnapshot, cancelled
from runyard.worker.registry import RunningRun, carry_through_stops

log = logging.getLogger("runyard.worker")
T = TypeVar("T")


class AttemptEndings:
    """Ends attempts that stop, fail or lose the store; built from the lifecycle, the run
    queue and the settings."""

    def __init__(self, lifecycle: RunLifecycle, queue: RunQueue, settings: Settings) -> None:
        self._lifecycle = lifecycle
        self._queue = queue
        self._settings = settings

    async def failed(
        self,
        run: RunRecord,
        entry: RunningRun,
        exc: Exception,
        graph: Pregel | None,
        timed_out: bool,
    ) -> Outcome | None:
        """The outcome of an attempt whose graph raised `exc` (`timed_out`: the job timeout
        stopped it): a store outage or fault hands the run back, anything else ends it."""
        run_id = run.run_id
        if timed_out:
            job_limit = self._settings.bg_job_timeout_secs
            return Outcome(
                RunStatus.TIMEOUT,
                error={
                    "error": "TimeoutError",
                    "message": f"the run exceeded BG_JOB_TIMEOUT_SECS ({job_limit:g} s) "
                    "and was stopped",
                },
                graph=graph,
            )
        if store_unavailable(exc):
            # Not the graph's fault: the run resumes from its last checkpoint.
            return await self.hand_back(run, entry, "store_unavailable", graph)
        fault = store_fault(exc)
        if fault is not None:
            return await self.refused_by_store(run, entry, fault, graph)
        log.warning("run_failed run_id=%s error=%s", run_id, type(exc).__name__, exc_info=True)
        if isinstance(exc, DecryptionError):
            # The thread's state cannot be read back with these keys: the run ends
            # without it, once, rather than failing again while its end is written.
            return ended_without_state(RunStatus.ERROR, "DecryptionError", str(exc))
        return Outcome(
            RunStatus.ERROR,
            error={"error": type(exc).__name__, "message": str(exc)},
            graph=graph,
        )

    async def stopped(
        self, run: RunRecord, entry: RunningRun, reason: StopReason, graph: Pregel | None
    ) -> Outcome | None:
        """The outcome of an attempt stopped for `reason`: a cancel ends the run, a drain
        hands it back, any other stop stands the attempt down (None)."""
        if isinstance(reason, CancelAction):
            return cancelled(reason, graph)
        if reason is StandDown.RELEASE:
            return await self.hand_back(run, entry, "drain", graph)
        else:
            log.warning(
                "run_stood_down run_id=%s attempt=%s reason=%s",
                run.run_id,
                entry.attempt,
                reason,
            )
        return None

    async def refused_by_store(
        self, run: RunRecord, entry: RunningRun, fault: str, graph: Pregel | None
    ) -> Outcome | None:
        """The database refused a statement of this attempt (a timeout, exhausted resources:
        runyard/db/faults.py): the attempt counts, and the last one allowed fails the run."""
        limit = self._settings.bg_job_max_retries
        counted = run.attempt - run.handovers
        log.warning(
            "run_attempt_store_fault run_id=%s attempt=%s counted=%s limit=%s error=%s",
            run.run_id,
            entry.attempt,
            counted,
            limit,
            fault,
        )
        if counted < limit:
            return await self.hand_back(run, entry, "store_fault", graph, counted=True)
        message = (
            f"the database refused the run's statements on {counted} attempts "
            f"(BG_JOB_MAX_RETRIES={limit}); the last time: {fault}"
        )
        return Outcome(
            RunStatus.ERROR, error={"error": "StoreFault", "message": message}, graph=graph
        )

    async def hand_back(
        self,
        run: RunRecord,
        entry: RunningRun,
        reason: str,
        graph: Pregel | None,
        counted: bool = False,
    ) -> Outcome | None:
        """Return the run to pending (if this attempt still holds it) and queue it again.

        A stop landing meanwhile does not cut it short (its reason is acted on after). A
        run with a cancel requested is not handed back: the attempt ends it, the outcome
        returned, as any cancel does.
        """
        run_id = run.run_id

        async def release() -> FinalWrite:
            return await self._lifecycle.release(run_id, entry.attempt, counted)

        try:
            released = await carry_through_stops(
                entry, until_store_answers(self._settings, "hand_back", run_id, release)
            )
        except Exception:
            # The lease runs out instead, and the reaper hands the run on.
            log.warning(
                "run_hand_back_failed run_id=%s attempt=%s reason=%s",
                run_id,
                entry.attempt,
                reason,
                exc_info=True,
            )
            return None
        if released.stop is not None:
            log.info(
                "run_hand_back_cancelled run_id=%s attempt=%s reason=%s action=%s",
                run_id,
                entry.attempt,
                reason,
                released.stop,
            )
            return await self.stopped(run, entry, released.stop, graph)
        log.info(
            "run_handed_back run_id=%s attempt=%s reason=%s released=%s counted=%s",
            run_id,
            entry.attempt,
            reason,
            released.done,
            counted,
        )
        if released.done:
            try:
                push = self._queue.push(run_id, 0.0, run.priority, run.fairness_group)
                await carry_through_stops(entry, push)
            except Exception:
                # The sweeper finds a pending run nobody queued.
                log.warning("run_requeue_failed run_id=%s", run_id, exc_info=True)
        return None


async def until_store_answers(
    settings: Settings, what: str, run_id: str, call: Callable[[], Awaitable[T]]
) -> T:
    """`call()`, again while the store is unreachable, for at most one lease."""
    return await retry_while_store_unavailable(
        call,
        settings.lease_duration_seconds,
        "store_unavailable_retrying",
        step=what,
        run_id=run_id,
    )


def ended_without_state(status: RunStatus, error: str, message: str) -> Outcome:
    """An outcome recorded without reading the thread's state (that read is what failed)."""
    return Outcome(
        status,
        error={"error": error, "message": message},
        snapshot=ThreadSnapshot(None, {}, False),
    )
