"""The reaper (every instance): runs whose lease expired go back to the queue, stranded pending
runs are pushed again."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from runyard.db import runs as runs_db

if TYPE_CHECKING:
    from runyard.runtime import Runtime

log = logging.getLogger("runyard.lease")


class Reaper:
    """Recovers runs whose lease expired and re-pushes pending runs nobody queued."""

    def __init__(self, runtime: Runtime) -> None:
        self._rt = runtime

    async def run_forever(self, stop: asyncio.Event) -> None:
        """Loop until `stop` is set."""
        interval = self._rt.settings.reaper_interval_seconds
        while not stop.is_set():
            await self.reap_once()
            try:
                await asyncio.wait_for(stop.wait(), interval)
                return
            except TimeoutError:
                pass

    async def reap_once(self) -> None:
        """One round: expired leases back to pending (or failed), stranded runs re-pushed."""
        rt = self._rt
        try:
            await rt.lifecycle.requeue_expired(rt.settings.bg_job_max_retries)
            async with rt.autocommit() as session:
                stale_after = rt.settings.stuck_pending_threshold_seconds
                pending = await runs_db.stranded_pending_runs(session, stale_after, limit=1000)
            ids = [row["run_id"] for row in pending]
            queued = await rt.queue.queued(ids)
            missing = [run_id for run_id in ids if run_id not in queued]
            if missing:
                # A run popped and claimed between the select and the queue check is not
                # stranded: re-read, or a busy backlog re-pushes every run it just started.
                async with rt.autocommit() as session:
                    still = await runs_db.pending_among(session, missing)
                for run_id in missing:
                    if run_id in still:
                        await rt.queue.push(run_id)
        except Exception:
            log.exception("reaper_round_failed")

    async def recover_lost_attempts(self) -> list[dict[str, Any]]:
        """Start of a single-process instance: every running run lost its attempt (its
        process is gone). Each goes back to pending or fails, as the reaper decides.
        Returns the recovered runs; none is queued here (the caller queues every pending
        run)."""
        return await self._rt.lifecycle.requeue_expired(
            self._rt.settings.bg_job_max_retries, every_lease=True, push=False
        )
