"""Applies thread time-to-lives: every instance sweeps, each expired thread is claimed once."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from runyard.domain.retention import ThreadTTLPolicy
from runyard.loops import every

log = logging.getLogger("runyard.retention")


class ThreadTTLSweeper:
    """Every `checkpointer.ttl.sweep_interval_minutes`, deletes or prunes expired threads."""

    def __init__(
        self, policy: ThreadTTLPolicy, sweep: Callable[[ThreadTTLPolicy], Awaitable[Any]]
    ) -> None:
        self._policy = policy
        self._sweep = sweep
        self._interval = policy.sweep_interval_minutes * 60.0

    async def run_forever(self, stop: asyncio.Event) -> None:
        """Sweep until `stop` is set; a failed sweep is logged and retried next time."""
        await every(
            self._interval,
            stop,
            lambda: self._sweep(self._policy),
            log,
            "thread_sweep_failed",
        )
