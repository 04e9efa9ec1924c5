"""The job queue protocol and its in-process implementation (dev mode)."""

from __future__ import annotations

import asyncio
from typing import Protocol


class RunQueue(Protocol):
    """Carries run ids from the API to worker loops; the database stays the truth."""

    async def push(self, run_id: str, delay: float = 0.0) -> None:
        """Make the run available to workers, now or after `delay` seconds."""
        ...

    async def pop(self, timeout: float) -> str | None:
        """The next run id, or None after `timeout` seconds without one."""
        ...

    async def close(self) -> None:
        """Stop delayed pushes and release resources."""
        ...

    async def queued(self, run_ids: list[str]) -> set[str]:
        """Which of these run ids are waiting in the queue (so the sweeper skips them)."""
        ...

    async def depth(self) -> int:
        """How many run ids wait in the queue now (for the queue depth metric)."""
        ...


class InProcessRunQueue:
    """An asyncio queue inside the single dev-mode process."""

    def __init__(self) -> None:
        self._queue: asyncio.Queue[str] = asyncio.Queue()
        # Each delayed push not yet due, with its run id.
        self._timers: dict[asyncio.TimerHandle, str] = {}
        self._waiting: dict[str, int] = {}

    async def push(self, run_id: str, delay: float = 0.0) -> None:
        """Enqueue now, or schedule the enqueue after a delay."""
        if delay <= 0:
            self._put(run_id)
            return
        loop = asyncio.get_running_loop()
        handle: asyncio.TimerHandle

        def fire() -> None:
            self._timers.pop(handle, None)
            self._queue.put_nowait(run_id)

        self._waiting[run_id] = self._waiting.get(run_id, 0) + 1
        handle = loop.call_later(delay, fire)
        self._timers[handle] = run_id

    def _put(self, run_id: str) -> None:
        self._waiting[run_id] = self._waiting.get(run_id, 0) + 1
        self._queue.put_nowait(run_id)

    def _unwait(self, run_id: str) -> None:
        left = self._waiting.get(run_id, 1) - 1
        if left <= 0:
            self._waiting.pop(run_id, None)
        else:
            self._waiting[run_id] = left

    async def pop(self, timeout: float) -> str | None:
        """Wait up to `timeout` for a run id."""
        try:
            run_id = await asyncio.wait_for(self._queue.get(), timeout)
        except TimeoutError:
            return None
        self._unwait(run_id)
        return run_id

    async def queued(self, run_ids: list[str]) -> set[str]:
        """The ids among `run_ids` that are in the queue now."""
        return {rid for rid in run_ids if rid in self._waiting}

    async def depth(self) -> int:
        """Run ids ready in the queue (delayed ones not yet due are not counted)."""
        return self._queue.qsize()

    async def close(self) -> None:
        """Cancel pending delayed pushes: their ids no longer count as queued."""
        for handle, run_id in self._timers.items():
            handle.cancel()
            self._unwait(run_id)
        self._timers.clear()
