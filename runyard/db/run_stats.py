"""Counts of the runs waiting and executing across the deployment (for /metrics?format=json,
and the bound on one fairness group's pending runs)."""

from __future__ import annotations

from datetime import UTC, datetime
from functools import cache
from typing import Any

from sqlalchemy import Select, bindparam, func, literal, select
from sqlalchemy.ext.asyncio import AsyncConnection

from runyard.db.tables import runs
from runyard.domain.status import RunStatus


async def queue_stats(session: AsyncConnection) -> dict[str, Any]:
    """`n_pending`, `n_running` and the longest wait of a pending run, in seconds (or None)."""
    statement = (
        select(runs.c.status, func.count(), func.min(runs.c.created_at))
        .where(runs.c.status.in_((RunStatus.PENDING.value, RunStatus.RUNNING.value)))
        .group_by(runs.c.status)
    )
    rows = {row[0]: (int(row[1]), row[2]) for row in await session.execute(statement)}
    n_pending, oldest = rows.get(RunStatus.PENDING.value, (0, None))
    n_running, _ = rows.get(RunStatus.RUNNING.value, (0, None))
    waited = None
    if oldest is not None:
        waited = max(0.0, (datetime.now(UTC) - oldest).total_seconds())
    return {
        "n_pending": n_pending,
        "n_running": n_running,
        "pending_runs_wait_time_max_secs": waited,
    }


async def pending_by_group(session: AsyncConnection, limit: int) -> list[dict[str, Any]]:
    """The `limit` fairness groups with the most pending runs: `group`, `n_pending` and the
    longest wait of one of its pending runs in seconds, most pending first."""
    count = func.count()
    statement = (
        select(runs.c.fairness_group, count, func.min(runs.c.created_at))
        .where(runs.c.status == RunStatus.PENDING.value)
        .group_by(runs.c.fairness_group)
        .order_by(count.desc(), runs.c.fairness_group)
        .limit(limit)
    )
    now = datetime.now(UTC)
    return [
        {
            "group": str(row[0]),
            "n_pending": int(row[1]),
            "oldest_wait_secs": max(0.0, (now - row[2]).total_seconds()),
        }
        for row in await session.execute(statement)
    ]


@cache
def _pending_in_group_statement() -> Select[Any]:
    # Counted up to the bound: the cost stays that of the bound, whatever the backlog
    # (ix_runs_group_status serves it).
    held = (
        select(literal(1))
        .where(
            runs.c.fairness_group == bindparam("p_group"),
            runs.c.status == RunStatus.PENDING.value,
        )
        .limit(bindparam("p_limit"))
        .subquery()
    )
    return select(func.count()).select_from(held)


async def count_pending_in_group(session: AsyncConnection, group: str, limit: int) -> int:
    """How many pending runs the fairness group holds, counted up to `limit`."""
    params = {"p_group": group, "p_limit": limit}
    return int((await session.execute(_pending_in_group_statement(), params)).scalar_one())
