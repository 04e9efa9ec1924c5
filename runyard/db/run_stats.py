"""Counts of the runs waiting and executing across the deployment (for /metrics?format=json)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import func, select
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
