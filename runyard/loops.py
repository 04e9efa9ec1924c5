"""Groups of background loops that one owner starts by name and stops together."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

log = logging.getLogger("runyard.runtime")


class LoopGroup:
    """Background loops stopped together: one stop event, then a grace period, then cancel."""

    def __init__(self, name: str, grace: float = 5.0) -> None:
        self.name = name
        # How long `stop` lets the loops end by themselves before it cancels them.
        self.grace = grace
        self._stop = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []

    def start(self, name: str, body: Callable[[asyncio.Event], Coroutine[Any, Any, None]]) -> None:
        """Start a loop that runs until the group's stop event is set."""
        self._tasks.append(asyncio.create_task(body(self._stop), name=name))

    def dead(self) -> list[str]:
        """Names of the loops that ended while they should run."""
        return [t.get_name() for t in self._tasks if t.done() and not self._stop.is_set()]

    async def stop(self) -> None:
        """Set the stop event, wait up to the group's grace, cancel what is left (idempotent)."""
        self._stop.set()
        if self._tasks:
            _done, pending = await asyncio.wait(self._tasks, timeout=self.grace)
            for task in pending:
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)
            log.debug("loops_stopped group=%s", self.name)


async def every(
    interval: float,
    stop: asyncio.Event,
    step: Callable[[], Awaitable[object]],
    logger: logging.Logger,
    failed: str,
) -> None:
    """Run `step` every `interval` seconds, the first time one interval from now, until
    `stop` is set; a step that fails is logged as `failed` and run again next time."""
    while not stop.is_set():
        try:
            await asyncio.wait_for(stop.wait(), timeout=interval)
            return
        except TimeoutError:
            pass
        try:
            await step()
        except Exception:
            logger.exception(failed)
