"""Worker loops: take run ids from the queue and execute them within a slot budget."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Protocol

from runyard.domain.status import StandDown

if TYPE_CHECKING:
    from runyard.queue.run_queue import RunQueue
    from runyard.worker.execute import RunExecutor
    from runyard.worker.registry import RunningRuns

log = logging.getLogger("runyard.worker")


class Alive(Protocol):
    """Whether this instance counts as alive to the others (runyard/background/liveness.py)."""

    def alive(self) -> bool:
        """True while it does."""
        ...

    async def until_alive(self) -> None:
        """Return once it does."""
        ...


class WorkerPool:
    """`count` loops, each holding up to `slots` runs under its own semaphore, claiming only
    while `alive` says this instance counts as alive (a fleet's liveness lock)."""

    def __init__(
        self,
        queue: RunQueue,
        executor: RunExecutor,
        running: RunningRuns,
        count: int,
        slots: int,
        liveness: Alive | None = None,
    ) -> None:
        self._queue = queue
        # Whether this instance counts as alive (its liveness lock): a run claimed while it
        # does not would be taken over at once.
        self._liveness = liveness
        self._executor = executor
        self._running = running
        self._count = count
        self._slots = slots
        self._stopping = asyncio.Event()
        self._loops: list[asyncio.Task[None]] = []
        self._runs: set[asyncio.Task[None]] = set()

    @property
    def capacity(self) -> int:
        """Runs this instance executes at most at once: loops x slots."""
        return self._count * self._slots

    @property
    def draining(self) -> bool:
        """True once shutdown began: no new run is taken."""
        return self._stopping.is_set()

    def healthy(self) -> bool:
        """False when a loop died (it should only end on stop)."""
        return all(not t.done() for t in self._loops) or self.draining

    def start(self) -> None:
        """Start the loops."""
        for index in range(self._count):
            task = asyncio.create_task(self._loop(index), name=f"worker-loop-{index}")
            self._loops.append(task)

    async def _loop(self, index: int) -> None:
        semaphore = asyncio.Semaphore(self._slots)
        while not self._stopping.is_set():
            await semaphore.acquire()
            if self._liveness is not None:
                await self._liveness.until_alive()
            try:
                run_id = await self._queue.pop(timeout=1.0)
            except Exception:
                semaphore.release()
                log.exception("worker_pop_failed loop=%s", index)
                await asyncio.sleep(1.0)
                continue
            if run_id is None or self._stopping.is_set() or not self._alive():
                semaphore.release()
                if run_id is not None:
                    # Its priority is not known here: it goes back at the default one, and
                    # another instance (or this one's next start) takes it from there.
                    await self._queue.push(run_id)
                    await self._queue.settle(run_id)
                continue
            task = asyncio.create_task(self._guarded(run_id), name=f"run:{run_id}")
            self._runs.add(task)
            task.add_done_callback(self._runs.discard)
            task.add_done_callback(lambda _t: semaphore.release())

    def _alive(self) -> bool:
        return self._liveness is None or self._liveness.alive()

    async def _guarded(self, run_id: str) -> None:
        try:
            await self._executor.execute(run_id)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("run_execution_crashed run_id=%s", run_id)

    def stop_claiming(self) -> None:
        """Take no run from now on (a loop waiting on the queue puts back what it pops)."""
        self._stopping.set()

    async def stop_intake(self) -> None:
        """Stop taking runs (idempotent): the loops end, the runs they took go on."""
        self.stop_claiming()
        for loop in self._loops:
            loop.cancel()
        await asyncio.gather(*self._loops, return_exceptions=True)

    async def drain(self, timeout: float) -> None:
        """Claim nothing more, and let the runs in flight finish for up to `timeout` s."""
        await self.stop_intake()
        if self._runs and timeout > 0:
            await asyncio.wait(set(self._runs), timeout=timeout)

    async def hand_back(self) -> None:
        """Hand every run still executing here back to pending, at once, for another
        instance to resume, and wait for their attempts to end (the caller bounds the wait:
        RUNYARD_HANDBACK_TIMEOUT_SECONDS, runyard/wiring/shutdown.py)."""
        await self.stop_intake()
        for entry in self._running.all():
            self._running.stop(entry.run_id, StandDown.RELEASE)
        try:
            if self._runs:
                await asyncio.wait(set(self._runs))
        finally:
            log.info("worker_pool_stopped")
