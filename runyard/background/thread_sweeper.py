"""Applies thread time-to-lives: every instance sweeps, each expired thread is claimed once."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from runyard.domain.retention import ThreadTTLPolicy
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
        while not stop.is_set():
            try:
                await asyncio.wait_for(stop.wait(), timeout=self._interval)
                return
            except TimeoutError:
                pass
            try:
                await sweep_expired_threads(self._runtime, self._policy)
            except Exception:
                log.exception("thread_sweep_failed")
