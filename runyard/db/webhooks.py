"""SQL statements of the webhook outbox: record a delivery owed, claim due ones with a
lease (one conditional UPDATE), renew the leases of those being attempted, and record each
attempt's outcome, fenced by the attempt."""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import Any

from sqlalchemy import Delete, Insert, Update, bindparam, delete, select, tuple_, update
from sqlalchemy.ext.asyncio import AsyncConnection

from runyard.db.dialect import clock, clock_plus, dialect_name, insert_ignoring, seconds_param
from runyard.db.driver import fetch_all
from runyard.db.tables import webhook_deliveries as wd
from runyard.domain.status import DeliveryStatus


@cache
def _insert_statement(dialect: str) -> Insert:
    now = clock(dialect)
    return (
        insert_ignoring(dialect, wd)
        .values(
            delivery_id=bindparam("p_id"),
            run_id=bindparam("p_run_id"),
            url=bindparam("p_url"),
            payload=bindparam("p_payload", type_=wd.c.payload.type),
            status=DeliveryStatus.PENDING.value,
            attempts=1,
            owner=bindparam("p_owner"),
            lease_expires_at=clock_plus(dialect, "p_lease"),
            created_at=now,
            updated_at=now,
        )
        .returning(wd.c.delivery_id)
    )


async def insert_claimed(
    session: AsyncConnection,
    delivery_id: str,
    run_id: str,
    url: str,
    payload: dict[str, Any],
    owner: str,
    lease_seconds: float,
) -> bool:
    """Record a delivery owed, already claimed by `owner` for its first attempt (one
    statement); False when it was recorded before."""
    dialect = dialect_name(session)
    rows = await fetch_all(
        session,
        _insert_statement(dialect),
        {
            "p_id": delivery_id,
            "p_run_id": run_id,
            "p_url": url,
            "p_payload": payload,
            "p_owner": owner,
            "p_lease": seconds_param(dialect, lease_seconds),
        },
    )
    return bool(rows)


@cache
def _claim_statement(dialect: str) -> Update:
    now = clock(dialect)
    due = (wd.c.status == DeliveryStatus.PENDING.value, wd.c.lease_expires_at < now)
    candidates = (
        select(wd.c.delivery_id)
        .where(*due)
        .order_by(wd.c.lease_expires_at)
        .limit(bindparam("p_limit"))
    )
    if dialect == "postgresql":
        candidates = candidates.with_for_update(skip_locked=True)
    # The outer condition is checked again on the locked row: two claimers never both win.
    return (
        update(wd)
        .where(wd.c.delivery_id.in_(candidates.scalar_subquery()), *due)
        .values(
            owner=bindparam("p_owner"),
            attempts=wd.c.attempts + 1,
            lease_expires_at=clock_plus(dialect, "p_lease"),
            updated_at=now,
        )
        .returning(wd)
    )


async def claim_due(
    session: AsyncConnection, owner: str, lease_seconds: float, limit: int
) -> list[dict[str, Any]]:
    """Take up to `limit` pending deliveries whose lease expired or whose retry is due:
    owner, a new lease and the next attempt number, from the database clock."""
    dialect = dialect_name(session)
    params = {"p_owner": owner, "p_lease": seconds_param(dialect, lease_seconds), "p_limit": limit}
    return [dict(row) for row in await fetch_all(session, _claim_statement(dialect), params)]


@cache
def _extend_statement(dialect: str) -> Update:
    return (
        update(wd)
        .where(
            tuple_(wd.c.delivery_id, wd.c.attempts).in_(bindparam("p_held", expanding=True)),
            wd.c.owner == bindparam("p_owner"),
            wd.c.status == DeliveryStatus.PENDING.value,
        )
        .values(lease_expires_at=clock_plus(dialect, "p_lease"))
    )


async def extend_leases(
    session: AsyncConnection, owner: str, held: Sequence[tuple[str, int]], lease_seconds: float
) -> None:
    """Renew the leases of exactly these (delivery id, attempt) pairs `owner` is attempting,
    in one statement: a delivery waiting its turn to be sent is not claimed again meanwhile,
    and one whose attempt was lost with its task is left to expire."""
    if not held:
        return
    dialect = dialect_name(session)
    params = {
        "p_held": list(held),
        "p_owner": owner,
        "p_lease": seconds_param(dialect, lease_seconds),
    }
    await session.execute(_extend_statement(dialect), params)


@cache
def _end_statement(dialect: str) -> Update:
    now = clock(dialect)
    return (
        update(wd)
        .where(
            wd.c.delivery_id == bindparam("p_id"),
            wd.c.owner == bindparam("p_owner"),
            wd.c.attempts == bindparam("p_attempt"),
            wd.c.status == DeliveryStatus.PENDING.value,
        )
        .values(
            status=bindparam("p_status"),
            owner=None,
            lease_expires_at=clock_plus(dialect, "p_due"),
            last_error=bindparam("p_error"),
            updated_at=now,
        )
        .returning(wd.c.delivery_id)
    )


async def end_attempt(
    session: AsyncConnection,
    delivery_id: str,
    owner: str,
    attempt: int,
    status: DeliveryStatus,
    error: str | None,
    retry_in: float = 0.0,
) -> bool:
    """Record an attempt's outcome: final (`status` not pending), or pending again with the
    next attempt due in `retry_in` seconds. False when the attempt no longer holds it."""
    dialect = dialect_name(session)
    params = {
        "p_id": delivery_id,
        "p_owner": owner,
        "p_attempt": attempt,
        "p_status": status.value,
        "p_error": error,
        "p_due": seconds_param(dialect, retry_in),
    }
    return bool(await fetch_all(session, _end_statement(dialect), params))


async def get_delivery(session: AsyncConnection, delivery_id: str) -> dict[str, Any] | None:
    """One delivery's row (for operators and tests)."""
    row = (await session.execute(select(wd).where(wd.c.delivery_id == delivery_id))).first()
    return dict(row._mapping) if row is not None else None


@cache
def _prune_statement(dialect: str) -> Delete:
    return delete(wd).where(
        wd.c.status != DeliveryStatus.PENDING.value,
        wd.c.updated_at < clock_plus(dialect, "p_age"),
    )


async def delete_ended(session: AsyncConnection, older_than_seconds: float) -> None:
    """Forget deliveries that ended (delivered, failed, refused) this long ago."""
    dialect = dialect_name(session)
    await fetch_all(
        session, _prune_statement(dialect), {"p_age": seconds_param(dialect, -older_than_seconds)}
    )
