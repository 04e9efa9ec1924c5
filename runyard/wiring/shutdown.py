"""Stopping an instance in named phases, as its parts started in named phases.

1. **stop intake**: the background loops (reaper, sweeps, crons, webhook outbox) stop,
   the runtime's short jobs end, and the worker pool stops claiming runs;
2. **drain**: the runs in flight get WORKER_DRAIN_TIMEOUT to finish (from SIGTERM, when
   the server received one: the drain begins then, beside HTTP shutdown);
3. **hand back**: the runs still executing go back to pending at once, for another
   instance to resume; then lease renewal stops and the liveness lock goes;
4. **close the transport**: the broker, queue and cancel bus, and the loops that read them;
5. **close the store**: the databases, the checkpointer, the long-term store, tracing.

Each phase is bounded by a setting (RUNYARD_SHUTDOWN_INTAKE_SECONDS, WORKER_DRAIN_TIMEOUT,
RUNYARD_HANDBACK_TIMEOUT_SECONDS, RUNYARD_SHUTDOWN_TRANSPORT_SECONDS,
RUNYARD_SHUTDOWN_STORE_SECONDS): a step still running at its phase's bound is cancelled,
logged, and the phase's remaining steps still run. Each phase is logged as it begins and
ends. Running the phases twice, or before anything started, does nothing more: a phase
holds only the steps of what started, and holds none once it ran.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sized
from contextlib import AsyncExitStack
from enum import StrEnum
from typing import Any

from runyard.settings import Settings
from runyard.worker.pool import WorkerPool

log = logging.getLogger("runyard.shutdown")

# The drain phase waits for the drain begun at SIGTERM (or by the first phase), which is
# itself bounded by WORKER_DRAIN_TIMEOUT: this much more lets that bound be the one reached.
DRAIN_MARGIN_SECONDS = 1.0
# How long the runtime's short jobs (a webhook's first attempt, say) get to end at shutdown.
SHORT_JOBS_GRACE_SECONDS = 5.0


class Phase(StrEnum):
    """The shutdown phases, in the order they run."""

    STOP_INTAKE = "stop_intake"
    DRAIN = "drain"
    HAND_BACK = "hand_back"
    CLOSE_TRANSPORT = "close_transport"
    CLOSE_STORE = "close_store"


def phase_bounds(settings: Settings) -> dict[Phase, float]:
    """Each phase's bound, in seconds, from the settings."""
    return {
        Phase.STOP_INTAKE: settings.shutdown_intake_seconds,
        Phase.DRAIN: settings.worker_drain_timeout + DRAIN_MARGIN_SECONDS,
        Phase.HAND_BACK: settings.handback_timeout_seconds,
        Phase.CLOSE_TRANSPORT: settings.shutdown_transport_seconds,
        Phase.CLOSE_STORE: settings.shutdown_store_seconds,
    }


class ShutdownPhases:
    """The steps of each phase, registered as the parts start; run by `run`."""

    def __init__(self, bounds: Mapping[Phase, float]) -> None:
        self._bounds = dict(bounds)
        self._steps = {phase: AsyncExitStack() for phase in Phase}

    def stack(self, phase: Phase) -> AsyncExitStack:
        """Where a starting part registers how it stops in `phase`: the steps of a phase run
        in reverse order of registration (what uses a connection stops before it closes)."""
        return self._steps[phase]

    def add(self, phase: Phase, step: Callable[[], Awaitable[object]]) -> None:
        """Register one step of `phase`."""
        self._steps[phase].push_async_callback(step)

    async def run(self) -> None:
        """Run every phase, in order, each within its bound."""
        for phase in Phase:
            await self.run_phase(phase)

    async def run_phase(self, phase: Phase) -> None:
        """Run the steps of one phase within its bound; once run, it holds no step."""
        bound = self._bounds[phase]
        started = time.monotonic()
        log.info("shutdown_phase_started phase=%s bound_seconds=%g", phase, bound)
        outcome = "done"
        try:
            async with asyncio.timeout(bound):
                await self._steps[phase].aclose()
        except TimeoutError:
            outcome = "timed_out"
        except Exception:
            # One part failing to stop must not keep the others open.
            log.exception("shutdown_phase_failed phase=%s", phase)
            outcome = "failed"
        seconds = time.monotonic() - started
        log.info("shutdown_phase_ended phase=%s outcome=%s seconds=%.2f", phase, outcome, seconds)


class WorkerHandover:
    """The worker pool's part of shutdown: stop claiming, drain, hand back. Begun by the
    first signal (SIGTERM) or by the stop-intake phase, whichever comes first; the drain and
    hand-back phases wait for it."""

    def __init__(
        self, workers: WorkerPool, running: Sized, drain_timeout: float, instance_id: str
    ) -> None:
        self._workers = workers
        self._running = running
        self._drain_timeout = drain_timeout
        self._instance_id = instance_id
        self._drained = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    @property
    def begun(self) -> bool:
        """True once the handover began: no run is claimed any more."""
        return self._task is not None

    def begin(self) -> None:
        """Stop claiming at once and start handing work over; idempotent."""
        if self._task is not None:
            return
        running = len(self._running)
        log.info("instance_draining instance=%s running=%s", self._instance_id, running)
        self._workers.stop_claiming()
        self._task = asyncio.create_task(self._hand_over(), name="drain")

    async def _hand_over(self) -> None:
        try:
            await self._workers.drain(self._drain_timeout)
        finally:
            self._drained.set()
        await self._workers.hand_back()

    async def stop_intake(self) -> None:
        """Phase 1: the pool claims nothing more."""
        self.begin()
        await self._workers.stop_intake()

    async def drained(self) -> None:
        """Phase 2: the runs in flight finished, or WORKER_DRAIN_TIMEOUT passed."""
        if self._task is not None:
            await self._drained.wait()

    async def handed_back(self) -> None:
        """Phase 3: the runs still executing were handed back and their attempts ended."""
        if self._task is not None:
            await self._task


def hand_over_workers(
    phases: ShutdownPhases,
    workers: WorkerPool,
    running: Sized,
    settings: Settings,
    instance_id: str,
) -> WorkerHandover:
    """The pool's handover, its steps registered in the stop-intake, drain and hand-back
    phases (in the hand-back phase, before what was registered there before it)."""
    handover = WorkerHandover(workers, running, settings.worker_drain_timeout, instance_id)
    phases.add(Phase.STOP_INTAKE, handover.stop_intake)
    phases.add(Phase.DRAIN, handover.drained)
    phases.add(Phase.HAND_BACK, handover.handed_back)
    return handover


class ShortJobs:
    """Short background jobs the runtime owns, each started by name and kept until it ends;
    awaited in the stop-intake phase for up to SHORT_JOBS_GRACE_SECONDS."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[Any]] = set()

    def spawn(self, coro: Coroutine[Any, Any, Any], name: str) -> None:
        """Run `coro` as a task named `name`."""
        task = asyncio.create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def wait(self) -> None:
        """Let the jobs still running end, for up to SHORT_JOBS_GRACE_SECONDS."""
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=SHORT_JOBS_GRACE_SECONDS)
