"""The cron scheduler loop (every instance): fire each due occurrence once, as an ordinary run."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import ValidationError

from runyard.db import crons as crons_db
from runyard.db import runs as runs_db
from runyard.db.dialect import database_now
from runyard.db.engine import Sessions
from runyard.domain.cron import CronRecord
from runyard.domain.cron_schedule import parse_timezone, plan_firing
from runyard.domain.encryption_context import CONTEXT_KEY, use_context
from runyard.domain.errors import RunyardError
from runyard.domain.run import RunRecord
from runyard.schemas.runs import RunCreate
from runyard.services.crons import owner_configurable

if TYPE_CHECKING:
    from runyard.encryption.custom import CustomEncryption

log = logging.getLogger("runyard.crons")

BATCH_SIZE = 100
# A claim that recorded neither a run nor an error after this long lost its instance.
UNFINISHED_AFTER = timedelta(seconds=30)
# Claims are only needed while their occurrence could still be fired again.
CLAIM_RETENTION = timedelta(days=1)
HOUSEKEEPING_EVERY_SECONDS = 60.0


class CreateRun(Protocol):
    """Creates one ordinary run as a client's request would (services/runs.py create_run,
    bound to the instance's parts)."""

    def __call__(
        self,
        thread_id: str | None,
        body: RunCreate,
        *,
        idempotency_key: str,
        configurable: dict[str, Any],
    ) -> Awaitable[RunRecord]: ...


def occurrence_key(cron_id: str, scheduled_for: datetime) -> str:
    """The idempotency key of the run one occurrence creates (the same on every instance)."""
    return f"cron:{cron_id}:{scheduled_for.isoformat()}"


class CronScheduler:
    """Polls for due crons; claims, fires and reschedules them. Safe on any number of instances.

    Each tick moves a due cron's next run date with a compare-and-set (the row lock
    serializes instances), then inserts the (cron_id, scheduled_for) claim: only the
    instance whose insert lands creates the run, under an idempotency key derived from
    the occurrence, so even a retried claim yields one run.
    """

    def __init__(
        self,
        sessions: Sessions,
        autocommit: Sessions,
        create_run: CreateRun,
        instance_id: str,
        interval_seconds: float,
        encryption: CustomEncryption | None = None,
    ) -> None:
        self._sessions = sessions
        self._encryption = encryption
        self._autocommit = autocommit
        self._create_run = create_run
        self._instance_id = instance_id
        self._interval = interval_seconds
        self._wake = asyncio.Event()
        self._housekeeping_at = 0.0

    def wake(self) -> None:
        """Look again at once (a cron was created or changed on this instance)."""
        self._wake.set()

    async def run_forever(self, stop: asyncio.Event) -> None:
        """Tick until `stop` is set; a failed tick is logged and retried after the interval."""
        while not stop.is_set():
            # Cleared before the tick, so a wake-up during the tick triggers another one.
            self._wake.clear()
            try:
                delay = await self.tick()
            except Exception:
                log.exception("cron_tick_failed")
                delay = self._interval
            if delay <= 0:
                continue
            waits = [asyncio.ensure_future(stop.wait()), asyncio.ensure_future(self._wake.wait())]
            try:
                await asyncio.wait(waits, timeout=delay, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for waiter in waits:
                    waiter.cancel()

    async def tick(self) -> float:
        """Fire every due cron once; the seconds to sleep before the next tick."""
        async with self._autocommit() as session:
            now = await database_now(session)
            due = await crons_db.due_crons(session, now, BATCH_SIZE)
        for cron in due:
            try:
                await self.fire(cron, now)
            except Exception:
                log.exception("cron_fire_failed cron_id=%s", cron.cron_id)
        if time.monotonic() >= self._housekeeping_at:
            self._housekeeping_at = time.monotonic() + HOUSEKEEPING_EVERY_SECONDS
            await self.housekeeping(now)
        if len(due) >= BATCH_SIZE:
            return 0.0
        async with self._autocommit() as session:
            upcoming = await crons_db.earliest_run_date(session)
            now = await database_now(session)
        if upcoming is None:
            return self._interval
        return min(self._interval, max((upcoming - now).total_seconds(), 0.01))

    async def fire(self, cron: CronRecord, now: datetime) -> str | None:
        """Fire a due cron's latest occurrence if this instance claims it; the run id."""
        due = cron.next_run_date
        if due is None:
            return None  # past its end time: nothing left to fire
        zone = parse_timezone(cron.timezone)
        plan = plan_firing(cron.schedule, zone, due, cron.end_time, now)
        if plan is None:
            return None
        cron_id = cron.cron_id
        async with self._sessions() as session, session.begin():
            moved = await crons_db.advance_cron(session, cron_id, due, plan.next_run_date)
            if not moved:
                return None  # another instance fired it, or the cron changed meanwhile
            claimed = plan.scheduled_for is not None and await crons_db.claim_firing(
                session, cron_id, plan.scheduled_for, self._instance_id
            )
        if plan.scheduled_for is None or not claimed:
            return None
        return await self.create_occurrence_run(cron, plan.scheduled_for)

    async def create_occurrence_run(self, cron: CronRecord, scheduled_for: datetime) -> str | None:
        """Create the ordinary run of one claimed occurrence and record it on the claim."""
        cron_id = cron.cron_id
        key = occurrence_key(cron_id, scheduled_for)
        run_id: str | None = None
        error: str | None = None
        try:
            if self._encryption is not None:
                # The run is written under the cron creator's context; it gets the cron's
                # metadata and payload in plain text, and encrypts them as its own.
                use_context((cron.payload or {}).get(CONTEXT_KEY) or {})
                cron = await self._encryption.open_cron(cron)
            body = _run_body(cron, scheduled_for)
            run = await self._create_run(
                cron.thread_id,
                body,
                idempotency_key=key,
                configurable=owner_configurable(cron.payload or {}),
            )
            run_id = run.run_id
        except (RunyardError, ValidationError) as exc:
            error = exc.message if isinstance(exc, RunyardError) else str(exc)
        async with self._sessions() as session, session.begin():
            if run_id is None:
                # A retried occurrence whose cron changed since: its run may exist already.
                existing = await runs_db.get_run_by_idempotency_key(session, key)
                if existing is not None:
                    run_id, error = existing.run_id, None
            await crons_db.finish_firing(session, cron_id, scheduled_for, run_id, error)
        if run_id is None:
            log.warning(
                "cron_occurrence_skipped cron_id=%s scheduled_for=%s reason=%s",
                cron_id,
                scheduled_for.isoformat(),
                error,
            )
        else:
            log.info(
                "cron_fired cron_id=%s scheduled_for=%s run_id=%s",
                cron_id,
                scheduled_for.isoformat(),
                run_id,
            )
        return run_id

    async def housekeeping(self, now: datetime) -> None:
        """Finish claims whose instance died before creating the run; forget old claims."""
        async with self._autocommit() as session:
            stranded = await crons_db.unfinished_firings(
                session, now - UNFINISHED_AFTER, BATCH_SIZE
            )
        for firing in stranded:
            log.info(
                "cron_occurrence_recovered cron_id=%s scheduled_for=%s",
                firing.cron.cron_id,
                firing.scheduled_for.isoformat(),
            )
            await self.create_occurrence_run(firing.cron, firing.scheduled_for)
        async with self._sessions() as session, session.begin():
            await crons_db.prune_firings(session, now - CLAIM_RETENTION)


def _run_body(cron: CronRecord, scheduled_for: datetime) -> RunCreate:
    payload = dict(cron.payload or {})
    payload.pop(CONTEXT_KEY, None)
    payload["metadata"] = {
        **(cron.metadata or {}),
        # Which cron and which occurrence made the run, for anyone looking at it later.
        "cron_id": cron.cron_id,
        "cron_scheduled_for": scheduled_for.isoformat(),
    }
    if cron.thread_id is None:
        payload["on_completion"] = cron.on_run_completed or "delete"
    return RunCreate.model_validate(payload)
