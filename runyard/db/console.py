"""SQL of the operator console's views: each statement bounded by a LIMIT and served by an
index (runs by status, by group and status, by end; crons by next firing; webhook deliveries
by status), so that a snapshot costs the same handful of statements whatever the size of the
fleet or of the history."""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, or_, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from runyard.db.dialect import clock, clock_plus, dialect_name, seconds_param
from runyard.db.tables import crons, runs
from runyard.db.tables import webhook_deliveries as wd
from runyard.domain.status import DeliveryStatus, RunStatus

FAILED = (RunStatus.ERROR.value, RunStatus.TIMEOUT.value)


def _rows(result: Any) -> list[dict[str, Any]]:
    return [dict(row._mapping) for row in result]


async def pending_by_group_and_priority(
    session: AsyncConnection, limit: int
) -> list[dict[str, Any]]:
    """Pending runs per fairness group and priority: `fairness_group`, `priority`, `pending`,
    `oldest` (the creation of the longest waiting), most pending first."""
    count = func.count().label("pending")
    statement = (
        select(
            runs.c.fairness_group,
            runs.c.priority,
            count,
            func.min(runs.c.created_at).label("oldest"),
        )
        .where(runs.c.status == RunStatus.PENDING.value)
        .group_by(runs.c.fairness_group, runs.c.priority)
        .order_by(count.desc(), runs.c.fairness_group, runs.c.priority.desc())
        .limit(limit)
    )
    return _rows(await session.execute(statement))


async def held_back(session: AsyncConnection, limit: int) -> list[dict[str, Any]]:
    """Pending runs held back by a group cap, with the reason, longest waiting first."""
    statement = (
        select(
            runs.c.run_id,
            runs.c.thread_id,
            runs.c.fairness_group,
            runs.c.priority,
            runs.c.held_back,
            runs.c.created_at,
        )
        .where(runs.c.status == RunStatus.PENDING.value, runs.c.held_back.is_not(None))
        .order_by(runs.c.created_at)
        .limit(limit)
    )
    return _rows(await session.execute(statement))


_RUN_COLUMNS = (
    runs.c.run_id,
    runs.c.thread_id,
    runs.c.assistant_id,
    runs.c.status,
    runs.c.owner,
    runs.c.last_owner,
    runs.c.attempt,
    runs.c.lease_expires_at,
    runs.c.fairness_group,
    runs.c.priority,
    runs.c.created_at,
    runs.c.started_at,
    runs.c.ended_at,
)


async def running(session: AsyncConnection, limit: int) -> list[dict[str, Any]]:
    """Running runs, the longest running first."""
    statement = (
        select(*_RUN_COLUMNS)
        .where(runs.c.status == RunStatus.RUNNING.value)
        .order_by(runs.c.started_at)
        .limit(limit)
    )
    return _rows(await session.execute(statement))


async def recent_failures(session: AsyncConnection, limit: int) -> list[dict[str, Any]]:
    """Runs that ended with an error or a timeout, the latest first, with their error."""
    statement = (
        select(*_RUN_COLUMNS, runs.c.error)
        .where(runs.c.ended_at.is_not(None), runs.c.status.in_(FAILED))
        .order_by(runs.c.ended_at.desc())
        .limit(limit)
    )
    return _rows(await session.execute(statement))


async def search_runs(session: AsyncConnection, term: str, limit: int) -> list[dict[str, Any]]:
    """Runs whose run, thread or assistant id is `term`, the latest first."""
    statement = (
        select(*_RUN_COLUMNS, runs.c.error)
        .where(or_(runs.c.run_id == term, runs.c.thread_id == term, runs.c.assistant_id == term))
        .order_by(runs.c.created_at.desc())
        .limit(limit)
    )
    return _rows(await session.execute(statement))


async def recent_runs(session: AsyncConnection, seconds: float, limit: int) -> list[dict[str, Any]]:
    """The runs that ended in the last `seconds` and those running (for the charts):
    `last_owner`, `fairness_group`, `started_at`, `ended_at`, the latest first."""
    dialect = dialect_name(session)
    columns = (runs.c.last_owner, runs.c.fairness_group, runs.c.started_at, runs.c.ended_at)
    ended = (
        select(*columns)
        .where(runs.c.ended_at >= clock_plus(dialect, "p_since"))
        .order_by(runs.c.ended_at.desc())
        .limit(limit)
    )
    params = {"p_since": seconds_param(dialect, -seconds)}
    rows = _rows(await session.execute(ended, params))
    active = (
        select(*columns)
        .where(runs.c.status == RunStatus.RUNNING.value)
        .order_by(runs.c.started_at.desc())
        .limit(limit)
    )
    return rows + _rows(await session.execute(active))


async def next_firings(session: AsyncConnection, limit: int) -> list[dict[str, Any]]:
    """Enabled crons by their next firing, the soonest first."""
    statement = (
        select(
            crons.c.cron_id,
            crons.c.assistant_id,
            crons.c.thread_id,
            crons.c.schedule,
            crons.c.timezone,
            crons.c.next_run_date,
            crons.c.end_time,
        )
        .where(crons.c.enabled.is_(True), crons.c.next_run_date.is_not(None))
        .order_by(crons.c.next_run_date)
        .limit(limit)
    )
    return _rows(await session.execute(statement))


async def open_deliveries(session: AsyncConnection, limit: int) -> list[dict[str, Any]]:
    """Webhook deliveries pending or failed, the latest change first, with their attempts
    and the last answer."""
    statement = (
        select(
            wd.c.delivery_id,
            wd.c.run_id,
            wd.c.url,
            wd.c.status,
            wd.c.attempts,
            wd.c.last_error,
            wd.c.lease_expires_at,
            wd.c.updated_at,
        )
        .where(wd.c.status.in_((DeliveryStatus.PENDING.value, DeliveryStatus.FAILED.value)))
        .order_by(wd.c.updated_at.desc())
        .limit(limit)
    )
    return _rows(await session.execute(statement))


async def retry_delivery(session: AsyncConnection, delivery_id: str) -> bool:
    """Make a failed delivery pending again with a fresh set of attempts, due now (the
    outbox claims it as any other); False when it is not a failed delivery."""
    dialect = dialect_name(session)
    result = await session.execute(
        update(wd)
        .where(wd.c.delivery_id == delivery_id, wd.c.status == DeliveryStatus.FAILED.value)
        .values(
            status=DeliveryStatus.PENDING.value,
            attempts=0,
            owner=None,
            lease_expires_at=clock_plus(dialect, "p_now"),
            updated_at=clock(dialect),
        )
        .returning(wd.c.delivery_id),
        {"p_now": seconds_param(dialect, -1.0)},
    )
    return result.first() is not None
