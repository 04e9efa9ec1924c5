"""The operator console's use cases: the fleet, the queue, runs, crons and webhooks in one
snapshot, and the actions an operator takes (cancel a run, retry a webhook delivery, drain an
instance), each through the same code path as the API and logged with who took it.

A snapshot is computed at most once per SNAPSHOT_SECONDS on an instance, whoever asks and
however many consoles are open (they share it); the charts, a larger read, at most once per
CHARTS_SECONDS. So one instance's console costs the database a few small statements a second
at most, whatever the number of viewers or instances.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

from runyard.db import console as console_db
from runyard.db import instances as instances_db
from runyard.db import liveness as liveness_db
from runyard.db.dialect import database_now
from runyard.db.engine import Sessions
from runyard.domain import console_charts
from runyard.domain.errors import ConflictError, NotFoundError
from runyard.domain.status import CancelAction
from runyard.domain.urls import masked_url
from runyard.schemas import console as wire
from runyard.services.runs import RunService

log = logging.getLogger("runyard.console")

SNAPSHOT_SECONDS = 1.5
CHARTS_SECONDS = 15.0
# Rows per list: enough for a screen, bounded whatever the backlog.
LIST_LIMIT = 50
# Runs the charts read at most (those of the last hour, the latest first).
CHART_ROWS = 20_000


class ConsoleService:
    """The console's views and actions, from the autocommit sessions, whether instances'
    liveness is known from PostgreSQL's advisory locks (a fleet) or from their heartbeats,
    the heartbeat interval, this instance's id and the runs service (cancel)."""

    def __init__(
        self,
        autocommit: Sessions,
        locks_known: bool,
        heartbeat_seconds: float,
        instance_id: str,
        runs: RunService,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._autocommit = autocommit
        self._locks_known = locks_known
        self._beat = heartbeat_seconds
        self.instance_id = instance_id
        self._runs = runs
        self._clock = clock
        self._lock = asyncio.Lock()
        self._snapshot: tuple[float, wire.Snapshot] | None = None
        # The latest snapshot's JSON, made once for every console that streams it.
        self._json: tuple[wire.Snapshot, str] | None = None
        self._charts: tuple[float, wire.Charts] | None = None

    async def snapshot(self) -> wire.Snapshot:
        """The latest snapshot, computed anew only when older than SNAPSHOT_SECONDS (one
        computation at a time: who asks meanwhile waits for it and shares it)."""
        async with self._lock:
            kept = self._snapshot
            if kept is not None and self._clock() - kept[0] < SNAPSHOT_SECONDS:
                return kept[1]
            fresh = await self._compute()
            self._snapshot = (self._clock(), fresh)
            return fresh

    async def snapshot_json(self) -> str:
        """The latest snapshot as JSON text (made once per snapshot, shared by every live
        console)."""
        snapshot = await self.snapshot()
        kept = self._json
        if kept is None or kept[0] is not snapshot:
            kept = self._json = (snapshot, snapshot.model_dump_json())
        return kept[1]

    async def _compute(self) -> wire.Snapshot:
        async with self._autocommit() as session:
            now = await database_now(session)
            fleet = await self._fleet(session, now)
            groups = await console_db.pending_by_group_and_priority(session, LIST_LIMIT)
            held = await console_db.held_back(session, LIST_LIMIT)
            running = await console_db.running(session, LIST_LIMIT)
            failures = await console_db.recent_failures(session, LIST_LIMIT)
            crons = await console_db.next_firings(session, LIST_LIMIT)
            deliveries = await console_db.open_deliveries(session, LIST_LIMIT)
            charts = await self._charts_at(session, now)
        return wire.Snapshot(
            generated_at=now,
            serving_instance=self.instance_id,
            fleet=fleet,
            queue=_queue(groups, held, now),
            running=[_run(row) for row in running],
            failures=[_run(row) for row in failures],
            crons=[wire.NextFiring.model_validate(row) for row in crons],
            webhooks=[_delivery(row) for row in deliveries],
            charts=charts,
        )

    async def _fleet(self, session: Any, now: datetime) -> list[wire.FleetInstance]:
        rows = await instances_db.list_instances(session)
        if self._locks_known:
            alive = await liveness_db.instances_alive(session, [r["instance_id"] for r in rows])
        else:
            # Without liveness locks (one process, or no Redis): alive while it beats.
            alive = {
                r["instance_id"]: (now - r["heartbeat_at"]).total_seconds() < 3 * self._beat
                for r in rows
            }
        return [
            wire.FleetInstance(
                **row,
                heartbeat_age_seconds=max(0.0, (now - row["heartbeat_at"]).total_seconds()),
                slots_free=max(0, row["slots"] - row["slots_used"]),
                alive=alive.get(row["instance_id"], False),
                serving=row["instance_id"] == self.instance_id,
            )
            for row in rows
        ]

    async def _charts_at(self, session: Any, now: datetime) -> wire.Charts:
        kept = self._charts
        if kept is not None and self._clock() - kept[0] < CHARTS_SECONDS:
            return kept[1]
        rows = await console_db.recent_runs(session, console_charts.MINUTES * 60, CHART_ROWS)
        built = console_charts.build_charts(rows, now)
        charts = wire.Charts(
            minutes=built.minutes,
            total=_series(built.total),
            by_instance=[_series(s) for s in built.by_instance],
            by_group=[_series(s) for s in built.by_group],
        )
        self._charts = (self._clock(), charts)
        return charts

    async def search(self, term: str) -> wire.RunSearch:
        """Runs whose run, thread or assistant id is `term` (the latest LIST_LIMIT)."""
        async with self._autocommit() as session:
            rows = await console_db.search_runs(session, term, LIST_LIMIT)
        return wire.RunSearch(term=term, runs=[_run(row) for row in rows])

    async def cancel(self, run_id: str, action: str, by: str) -> wire.ActionResult:
        """Cancel a run as POST /runs/cancel does (the same service), logged with `by`."""
        done = await self._runs.cancel_run(None, run_id, CancelAction(action))
        log.info("console_action action=cancel_%s run_id=%s by=%s", action, run_id, by)
        return wire.ActionResult(action=f"cancel_{action}", target=run_id, by=by, detail=done)

    async def retry_delivery(self, delivery_id: str, by: str) -> wire.ActionResult:
        """Make a failed webhook delivery pending again (fresh attempts, due now); the
        outbox of any instance then attempts it as any other."""
        async with self._autocommit() as session:
            retried = await console_db.retry_delivery(session, delivery_id)
        if not retried:
            raise ConflictError(
                f"webhook delivery {delivery_id} is not a failed delivery (it is unknown, "
                "pending or ended otherwise); only failed deliveries can be retried"
            )
        log.info("console_action action=retry_webhook delivery_id=%s by=%s", delivery_id, by)
        return wire.ActionResult(action="retry_webhook", target=delivery_id, by=by)

    async def drain(self, instance_id: str, by: str) -> wire.ActionResult:
        """Ask an instance to drain: recorded on its row, carried out by the instance at its
        next heartbeat (stop claiming, finish or hand back its runs, as on SIGTERM)."""
        async with self._autocommit() as session:
            known = await instances_db.request_drain(session, instance_id, by)
        if not known:
            raise NotFoundError(
                f"instance {instance_id} is not recorded; pick an id from /console/api/fleet"
            )
        log.info("console_action action=drain instance=%s by=%s", instance_id, by)
        return wire.ActionResult(action="drain", target=instance_id, by=by)


def _waited(now: datetime, since: datetime | None) -> float:
    return 0.0 if since is None else max(0.0, (now - since).total_seconds())


def _queue(groups: list[dict[str, Any]], held: list[dict[str, Any]], now: datetime) -> wire.Queue:
    oldest = min((g["oldest"] for g in groups if g["oldest"] is not None), default=None)
    return wire.Queue(
        pending=sum(int(g["pending"]) for g in groups),
        oldest_wait_seconds=None if oldest is None else _waited(now, oldest),
        groups=[
            wire.QueueGroup(
                fairness_group=g["fairness_group"],
                priority=g["priority"],
                pending=g["pending"],
                oldest_wait_seconds=_waited(now, g["oldest"]),
            )
            for g in groups
        ],
        held_back=[
            wire.HeldBackRun(
                run_id=h["run_id"],
                thread_id=h["thread_id"],
                fairness_group=h["fairness_group"],
                priority=h["priority"],
                reason=h["held_back"],
                wait_seconds=_waited(now, h["created_at"]),
            )
            for h in held
        ],
    )


def _run(row: dict[str, Any]) -> wire.ConsoleRun:
    error = row.get("error")
    text = (
        None
        if error is None
        else str(error.get("message", error) if isinstance(error, dict) else error)
    )
    return wire.ConsoleRun(
        **{k: v for k, v in row.items() if k != "error"}, error=text and text[:500]
    )


def _delivery(row: dict[str, Any]) -> wire.Delivery:
    return wire.Delivery(
        delivery_id=row["delivery_id"],
        run_id=row["run_id"],
        url=masked_url(row["url"]),
        status=row["status"],
        attempts=row["attempts"],
        last_answer=row["last_error"],
        next_attempt_at=row["lease_expires_at"],
        updated_at=row["updated_at"],
    )


def _series(series: console_charts.Series) -> wire.ChartSeries:
    return wire.ChartSeries(
        key=series.key,
        started=series.started,
        finished=series.finished,
        p50=series.p(0.5),
        p95=series.p(0.95),
    )
