"""Applies thread time-to-lives: every instance sweeps, each expired thread is claimed once."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from runyard.domain.retention import ThreadTTLPolicy
from runyard.loops import every
from runyard.services.retention import sweep_expired_threads

if TYPE_CHECKING:
    from runyard.runtime import Runtime

log = logging.getLogger("runyard.retention")


class ThreadTTLSweeper:
    """Every `checkpointer.ttl.sweep_interval_minutes`, deletes or prunes expired threads."""

    def __init__(self, runtime: Runtime, policy: ThreadTTLPolicy) -> None:
        self._runtime = runtime
        self._policy = policy
        self._interval = policy.sweep_interval_minutes * 60.0

    async def run_forever(self, stop: asyncio.Event) -> None:
        """Sweep until `stop` is set; a failed sweep is logged and retried next time."""
        await every(
            self._interval,
            stop,
            lambda: sweep_expired_threads(self._runtime, self._policy),
            log,
            "thread_sweep_failed",
        )
