"""SQL statements for crons and the per-occurrence claims that make each firing unique."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Select, delete, false, func, select, text, update
from sqlalchemy.ext.asyncio import AsyncConnection

from runyard.db.dialect import (
    dialect_name,
    insert_ignoring_conflicts,
    json_contains,
    json_filter,
    rowcount,
)
from runyard.db.tables import cron_firings, crons
from runyard.domain.cron import CronFiring, CronRecord, UnfinishedFiring, cron_or_none

_SORT_COLUMNS = {
    "cron_id": crons.c.cron_id,
    "assistant_id": crons.c.assistant_id,
    "thread_id": crons.c.thread_id,
    "next_run_date": crons.c.next_run_date,
    "end_time": crons.c.end_time,
    "created_at": crons.c.created_at,
    "updated_at": crons.c.updated_at,
}


@dataclass(frozen=True)
class CronQuery:
    """The filters of a cron search or count; None means no filter."""

    assistant_id: str | None = None
    thread_id: str | None = None
    enabled: bool | None = None
    metadata: dict[str, Any] | None = None
    auth_filter: dict[str, Any] | None = None


def _filtered(session: AsyncConnection, statement: Select[Any], query: CronQuery) -> Select[Any]:
    if query.assistant_id is not None:
        statement = statement.where(crons.c.assistant_id == query.assistant_id)
    if query.thread_id is not None:
        statement = statement.where(crons.c.thread_id == query.thread_id)
    if query.enabled is not None:
        statement = statement.where(crons.c.enabled == query.enabled)
    conditions = json_contains(session, crons.c.metadata, query.metadata or {})
    conditions += json_filter(session, crons.c.metadata, query.auth_filter or {})
    return statement.where(*conditions) if conditions else statement


async def lock_user_crons(session: AsyncConnection, user_id: str | None) -> None:
    """Hold the user's cron lock until the transaction ends, so that two requests cannot both
    count room for one more cron. SQLite has one write lock: a write that changes nothing
    takes it (its driver begins a transaction at the first write, not at a read)."""
    if dialect_name(session) != "postgresql":
        await session.execute(update(crons).where(false()).values(enabled=crons.c.enabled))
        return
    key = f"runyard-crons:{user_id or ''}"
    await session.execute(text("SELECT pg_advisory_xact_lock(hashtext(:key))"), {"key": key})


async def count_user_crons(session: AsyncConnection, user_id: str | None) -> int:
    """How many crons, enabled or not, the user (None: crons created with no user) has."""
    owner = crons.c.user_id.is_(None) if user_id is None else crons.c.user_id == user_id
    statement = select(func.count()).select_from(crons).where(owner)
    return int((await session.execute(statement)).scalar_one())


async def insert_cron(session: AsyncConnection, row: dict[str, Any]) -> CronRecord:
    """Insert a cron and return it as stored."""
    statement = crons.insert().values(**row).returning(*crons.c)
    return CronRecord.from_row((await session.execute(statement)).mappings().one())


async def get_cron(session: AsyncConnection, cron_id: str) -> CronRecord | None:
    """A cron, or None."""
    statement = select(crons).where(crons.c.cron_id == cron_id)
    return cron_or_none((await session.execute(statement)).mappings().one_or_none())


async def update_cron(
    session: AsyncConnection, cron_id: str, values: dict[str, Any]
) -> CronRecord | None:
    """Write the given columns of a cron; the updated cron, or None when it does not exist."""
    statement = update(crons).where(crons.c.cron_id == cron_id).values(**values).returning(*crons.c)
    return cron_or_none((await session.execute(statement)).mappings().one_or_none())


async def delete_cron(session: AsyncConnection, cron_id: str) -> bool:
    """Delete a cron (its claims go with it); False when it does not exist."""
    result = await session.execute(delete(crons).where(crons.c.cron_id == cron_id))
    return rowcount(result) > 0


async def search_crons(
    session: AsyncConnection,
    query: CronQuery,
    *,
    sort_by: str,
    descending: bool,
    limit: int,
    offset: int,
) -> list[CronRecord]:
    """One page of crons matching the query, in the given order (ties broken by id)."""
    column = _SORT_COLUMNS[sort_by]
    if descending:
        order = [column.desc(), crons.c.cron_id.desc()]
    else:
        order = [column.asc(), crons.c.cron_id.asc()]
    statement = _filtered(session, select(crons), query).order_by(*order)
    rows = (await session.execute(statement.limit(limit).offset(offset))).mappings().all()
    return [CronRecord.from_row(row) for row in rows]


async def count_crons(session: AsyncConnection, query: CronQuery) -> int:
    """How many crons match the query."""
    statement = _filtered(session, select(func.count()).select_from(crons), query)
    return int((await session.execute(statement)).scalar_one())


async def due_crons(session: AsyncConnection, now: datetime, limit: int) -> list[CronRecord]:
    """Enabled crons whose next run date has come, the most overdue first."""
    statement = (
        select(crons)
        .where(crons.c.enabled.is_(True), crons.c.next_run_date <= now)
        .order_by(crons.c.next_run_date.asc())
        .limit(limit)
    )
    return [CronRecord.from_row(row) for row in (await session.execute(statement)).mappings().all()]


async def earliest_run_date(session: AsyncConnection) -> datetime | None:
    """The soonest next run date of any enabled cron."""
    statement = select(func.min(crons.c.next_run_date)).where(crons.c.enabled.is_(True))
    value: datetime | None = (await session.execute(statement)).scalar_one_or_none()
    return value


async def advance_cron(
    session: AsyncConnection,
    cron_id: str,
    expected: datetime,
    next_run_date: datetime | None,
) -> bool:
    """Move the next run date on, only if nobody moved it since it was read (row-locking)."""
    result = await session.execute(
        update(crons)
        .where(crons.c.cron_id == cron_id, crons.c.next_run_date == expected)
        .values(next_run_date=next_run_date)
    )
    return rowcount(result) > 0


async def claim_firing(
    session: AsyncConnection, cron_id: str, scheduled_for: datetime, owner: str
) -> bool:
    """Claim one occurrence of a cron; True only for the one caller that inserted the row."""
    statement = (
        insert_ignoring_conflicts(session, cron_firings)
        .values(cron_id=cron_id, scheduled_for=scheduled_for, claimed_by=owner)
        .returning(cron_firings.c.cron_id)
    )
    return (await session.execute(statement)).first() is not None


async def finish_firing(
    session: AsyncConnection,
    cron_id: str,
    scheduled_for: datetime,
    run_id: str | None,
    error: str | None,
) -> None:
    """Record the run an occurrence created, or why it created none."""
    await session.execute(
        update(cron_firings)
        .where(cron_firings.c.cron_id == cron_id, cron_firings.c.scheduled_for == scheduled_for)
        .values(run_id=run_id, error=error)
    )


async def unfinished_firings(
    session: AsyncConnection, claimed_before: datetime, limit: int
) -> list[UnfinishedFiring]:
    """Claims older than `claimed_before` that recorded neither a run nor an error, with the cron.

    The instance that claimed them stopped between the claim and the run; firing them
    again is safe because the run is created under the occurrence's idempotency key.
    """
    statement = (
        select(cron_firings.c.scheduled_for, crons)
        .join(crons, crons.c.cron_id == cron_firings.c.cron_id)
        .where(
            cron_firings.c.run_id.is_(None),
            cron_firings.c.error.is_(None),
            cron_firings.c.claimed_at < claimed_before,
        )
        .order_by(cron_firings.c.claimed_at.asc())
        .limit(limit)
    )
    rows = (await session.execute(statement)).mappings().all()
    return [UnfinishedFiring.from_row(row) for row in rows]


async def list_firings(session: AsyncConnection, cron_id: str) -> list[CronFiring]:
    """Every recorded occurrence of one cron, oldest first."""
    statement = (
        select(cron_firings)
        .where(cron_firings.c.cron_id == cron_id)
        .order_by(cron_firings.c.scheduled_for.asc())
    )
    return [CronFiring.from_row(row) for row in (await session.execute(statement)).mappings().all()]


async def prune_firings(session: AsyncConnection, claimed_before: datetime) -> int:
    """Forget claims older than `claimed_before` (their cron has moved past them for good)."""
    result = await session.execute(
        delete(cron_firings).where(cron_firings.c.claimed_at < claimed_before)
    )
    return rowcount(result)
