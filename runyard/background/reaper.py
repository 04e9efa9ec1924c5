"""The reaper (every instance): runs whose lease expired, or whose instance is known dead, go
back to the queue; stranded pending runs are pushed again.

In a fleet on PostgreSQL an instance this reaper saw holding its liveness lock is known dead
once it holds it no longer (runyard/db/liveness.py, runyard/background/liveness.py): its runs
are taken over at the next round, without waiting for their leases. Otherwise (an instance
only paused keeps its lock; one never seen holding it may be of an earlier version) a run
waits for its lease to expire."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from runyard.db import liveness as liveness_db
from runyard.db import run_recovery as recovery_db
from runyard.db.engine import Sessions
from runyard.domain.run import Recovered

if TYPE_CHECKING:
    from runyard.lifecycle.machine import RunLifecycle
    from runyard.queue.run_queue import RunQueue

log = logging.getLogger("runyard.lease")


@dataclass(frozen=True)
class LivenessCheck:
    """Who checks the fleet's liveness (this instance's id), and how long its own liveness
    session must have lasted before it judges others by theirs (a lease)."""

    instance_id: str
    trust_seconds: float


@dataclass(frozen=True)
class ReaperSettings:
    """How often the reaper looks, how many lost attempts a run may have, how long a
    pending run waits before it counts as stranded, and the liveness check (None: leases
    alone, as in one process)."""

    interval_seconds: float
    max_retries: int
    stuck_pending_seconds: float
    liveness: LivenessCheck | None = None


class Reaper:
    """Recovers runs whose lease expired and re-pushes pending runs nobody queued."""

    def __init__(
        self,
        lifecycle: RunLifecycle,
        queue: RunQueue,
        autocommit: Sessions,
        settings: ReaperSettings,
    ) -> None:
        self._lifecycle = lifecycle
        self._queue = queue
        self._autocommit = autocommit
        self._settings = settings
        # Owners of running runs seen holding their liveness lock (runyard/db/liveness.py).
        self._seen_alive: set[str] = set()

    async def run_forever(self, stop: asyncio.Event) -> None:
        """Loop until `stop` is set."""
        interval = self._settings.interval_seconds
        while not stop.is_set():
            await self.reap_once()
            try:
                await asyncio.wait_for(stop.wait(), interval)
                return
            except TimeoutError:
                pass

    async def reap_once(self) -> None:
        """One round: runs of dead instances and expired leases back to pending (or
        failed), stranded runs re-pushed."""
        try:
            gone = await self._dead_owners()
            await self._lifecycle.requeue_expired(self._settings.max_retries, gone=gone)
            async with self._autocommit() as session:
                stale_after = self._settings.stuck_pending_seconds
                pending = await recovery_db.stranded_pending_runs(session, stale_after, limit=1000)
            ids = [place.run_id for place in pending]
            placing = {place.run_id: (place.priority, place.fairness_group) for place in pending}
            queued = await self._queue.queued(ids)
            missing = [run_id for run_id in ids if run_id not in queued]
            if missing:
                # A run popped and claimed between the select and the queue check is not
                # stranded: re-read, or a busy backlog re-pushes every run it just started.
                async with self._autocommit() as session:
                    still = await recovery_db.pending_among(session, missing)
                for run_id in missing:
                    if run_id in still:
                        await self._queue.push(run_id, 0.0, *placing[run_id])
        except Exception:
            log.exception("reaper_round_failed")

    async def _dead_owners(self) -> list[str]:
        """The owners this reaper saw holding their liveness lock, that hold it no longer
        and still hold runs (none without the check). An owner never seen alive (an
        instance of an earlier version, one that died before this reaper looked) is left to
        its leases."""
        check = self._settings.liveness
        if check is None:
            return []
        async with self._autocommit() as session:
            seen = await liveness_db.owners(session, check.instance_id, check.trust_seconds)
        dead = [o for o in seen.runs if o in self._seen_alive and o not in seen.alive]
        # Only owners that still hold runs are remembered: the set stays that small.
        self._seen_alive = (self._seen_alive | seen.alive) & seen.runs.keys()
        if not seen.trusted:
            return []
        for owner in dead:
            log.warning("instance_gone owner=%s runs=%s", owner, seen.runs[owner])
        return dead

    async def recover_lost_attempts(self) -> Recovered:
        """Start of a single-process instance: every running run lost its attempt (its
        process is gone). Each goes back to pending or fails, as the reaper decides.
        Returns the recovered runs; none is queued here (the caller queues every pending
        run)."""
        return await self._lifecycle.requeue_expired(
            self._settings.max_retries, every_lease=True, push=False
        )
