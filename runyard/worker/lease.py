"""Lease renewal for the runs this instance executes (the reaper recovers everyone else's)."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING

from runyard.db import run_attempts as attempts_db
from runyard.domain.status import CancelAction, StandDown

if TYPE_CHECKING:
    from runyard.db.engine import Sessions
    from runyard.observability.metrics import Metrics
    from runyard.settings import Settings
    from runyard.worker.registry import RunningRuns

log = logging.getLogger("runyard.lease")


class LeaseKeeper:
    """Renews the leases of exactly the attempts this instance executes, one statement a beat.

    The renewal also returns cancel flags, so a cancel whose message was missed still
    stops the run; and an attempt whose lease could not be renewed in time is stopped
    rather than left running unfenced. Renewal has a connection of its own and a time
    limit of one heartbeat, so busy API traffic cannot starve it past the lease.
    """

    def __init__(
        self,
        running: RunningRuns,
        sessions: Sessions,
        instance_id: str,
        settings: Settings,
        metrics: Metrics,
    ) -> None:
        self._running = running
        self._sessions = sessions
        self._instance_id = instance_id
        self._settings = settings
        self._metrics = metrics
        self._last_renewal = time.monotonic()

    async def run_forever(self, stop: asyncio.Event) -> None:
        """Loop until `stop` is set."""
        interval = self._settings.heartbeat_interval_seconds
        while not stop.is_set():
            try:
                await asyncio.wait_for(stop.wait(), interval)
                return
            except TimeoutError:
                pass
            await self.renew_once()

    async def renew_once(self) -> None:
        """One renewal round."""
        settings = self._settings
        # Only attempts registered before the UPDATE can be judged by its answer: one
        # claimed while the statement is in flight would look stale when it is not.
        entries = self._running.all()
        if not entries:
            self._last_renewal = time.monotonic()
            return
        attempts = [(entry.run_id, entry.attempt) for entry in entries]
        try:
            async with asyncio.timeout(settings.heartbeat_interval_seconds):
                async with self._sessions() as session, session.begin():
                    rows = await attempts_db.extend_leases(
                        session, self._instance_id, attempts, settings.lease_duration_seconds
                    )
        except Exception:
            log.warning(
                "lease_renewal_failed instance=%s attempts=%s",
                self._instance_id,
                len(attempts),
                exc_info=True,
            )
            self._metrics.lease_renewal_failures.inc()
            if time.monotonic() - self._last_renewal > settings.lease_duration_seconds:
                for entry in entries:
                    self._running.stop_attempt(entry, StandDown.STALE)
            return
        self._last_renewal = time.monotonic()
        self._metrics.lease_renewals.inc(len(rows))
        held = {(row["run_id"], row["attempt"]): row for row in rows}
        for entry in entries:
            row = held.get((entry.run_id, entry.attempt))
            if row is None:
                # Someone else holds the run now, or it ended or was deleted: stand down.
                self._running.stop_attempt(entry, StandDown.STALE)
            elif row["cancel_action"]:
                self._running.stop_attempt(entry, CancelAction(row["cancel_action"]))
