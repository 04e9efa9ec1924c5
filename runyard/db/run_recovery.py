"""Recovery of runs whose worker is gone: the reaper's pass that ends or requeues the runs whose
lease expired and settles their threads, and its reads of pending runs that wait too long
(or were never queued) so that they are queued again."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import (
    and_,
    case,
    exists,
    or_,
    select,
    true,
    update,
)
from sqlalchemy.ext.asyncio import AsyncConnection

from runyard.db import run_claims
from runyard.db.dialect import (
    clock_plus,
    db_now,
    dialect_name,
    seconds_param,
)
from runyard.db.tables import runs, threads
from runyard.domain.run import Recovered, RunPlace, RunRecord
from runyard.domain.status import ACTIVE_RUN_STATUSES, RunStatus, ThreadStatus

_ACTIVE = [s.value for s in ACTIVE_RUN_STATUSES]


async def requeue_expired(
    session: AsyncConnection,
    max_attempts: int,
    every_lease: bool = False,
    gone: Sequence[str] = (),
) -> Recovered:
    """Runs whose lease expired go back to pending (or fail after too many lost attempts).

    An attempt is lost when it neither finished nor was handed back (`handovers`). With
    `every_lease`, every running run counts as expired: the start of a single-process
    instance, whose predecessor held them all and is gone. The runs of the owners in `gone`
    (instances known dead: runyard/db/liveness.py) count as expired at once.

    A run that was being cancelled ends `interrupted` instead of running again. The runs
    that ended are returned whole (their ending needs webhook, temporary…); the requeued
    ones as their places in the queue.
    """
    now = db_now(session)
    lost = runs.c.lease_expires_at < now
    if gone:
        lost = or_(lost, runs.c.owner.in_(list(gone)))
    expired = and_(runs.c.status == RunStatus.RUNNING, true() if every_lease else lost)
    if dialect_name(session) == "postgresql":
        await _lock_threads_of(session, expired)
    cancelled = await _interrupt_cancelled(session, expired, now)
    failed = await _fail_exhausted(session, expired, now, max_attempts)
    requeued = await _requeue(session, expired, now)
    await _settle_threads(session, cancelled, failed, now)
    return Recovered([*cancelled, *failed], requeued)


async def _lock_threads_of(session: AsyncConnection, expired: Any) -> None:
    """The threads first, in one order, then their runs (runyard/lifecycle/machine.py)."""
    await session.execute(
        select(threads.c.thread_id)
        .where(threads.c.thread_id.in_(select(runs.c.thread_id).where(expired)))
        .order_by(threads.c.thread_id)
        .with_for_update()
    )


async def _interrupt_cancelled(session: AsyncConnection, expired: Any, now: Any) -> list[RunRecord]:
    """A cancelled run whose worker died is not run again: the cancel was acknowledged."""
    result = await session.execute(
        update(runs)
        .where(expired, runs.c.cancel_action.is_not(None))
        .values(
            status=RunStatus.INTERRUPTED,
            owner=None,
            lease_expires_at=None,
            ended_at=now,
            updated_at=now,
        )
        .returning(*runs.c)
    )
    return [RunRecord.from_row(row) for row in result.mappings().all()]


async def _fail_exhausted(
    session: AsyncConnection, expired: Any, now: Any, max_attempts: int
) -> list[RunRecord]:
    """The runs that lost `max_attempts` attempts end in error."""
    result = await session.execute(
        update(runs)
        .where(expired, runs.c.attempt - runs.c.handovers >= max_attempts)
        .values(
            status=RunStatus.ERROR,
            owner=None,
            lease_expires_at=None,
            ended_at=now,
            updated_at=now,
            error={
                "error": "RetryLimitExceeded",
                "message": f"the run was retried {max_attempts} times after its worker "
                "was lost (crash, kill or lease expiry) and was given up "
                "(BG_JOB_MAX_RETRIES)",
            },
        )
        .returning(*runs.c)
    )
    return [RunRecord.from_row(row) for row in result.mappings().all()]


async def _requeue(session: AsyncConnection, expired: Any, now: Any) -> list[RunPlace]:
    """The other expired runs go back to pending."""
    result = await session.execute(
        update(runs)
        .where(expired)
        .values(status=RunStatus.PENDING, owner=None, lease_expires_at=None, updated_at=now)
        .returning(runs.c.run_id, runs.c.priority, runs.c.fairness_group)
    )
    return [RunPlace.from_row(row) for row in result.mappings().all()]


async def _settle_threads(
    session: AsyncConnection,
    cancelled: list[RunRecord],
    failed: list[RunRecord],
    now: Any,
) -> None:
    """The thread-status rule of runyard/lifecycle/machine.py: busy while a run is pending or
    running; otherwise interrupted after a cancelled run, error after a failed one."""
    waiting = exists().where(runs.c.thread_id == threads.c.thread_id, runs.c.status.in_(_ACTIVE))
    # Plain values in case(): it has no column to type an enum member's bind by.
    if cancelled:
        await session.execute(
            update(threads)
            .where(threads.c.thread_id.in_({run.thread_id for run in cancelled}))
            .values(
                status=case(
                    (waiting, ThreadStatus.BUSY.value), else_=ThreadStatus.INTERRUPTED.value
                ),
                updated_at=now,
            )
        )
    if failed:
        # A failed run leaves its thread in error (busy if another run waits), as finalize
        # does; otherwise the thread would stay busy forever.
        await session.execute(
            update(threads)
            .where(threads.c.thread_id.in_({run.thread_id for run in failed}))
            .values(
                status=case((waiting, ThreadStatus.BUSY.value), else_=ThreadStatus.ERROR.value),
                error=failed[0].error,
                updated_at=now,
            )
        )


async def pending_run_ids(session: AsyncConnection, limit: int) -> list[RunPlace]:
    """The places of pending runs, oldest first."""
    stmt = (
        select(runs.c.run_id, runs.c.scheduled_at, runs.c.priority, runs.c.fairness_group)
        .where(runs.c.status == RunStatus.PENDING)
        .order_by(runs.c.created_at)
        .limit(limit)
    )
    return [RunPlace.from_row(row) for row in (await session.execute(stmt)).mappings().all()]


async def stranded_pending_runs(
    session: AsyncConnection, older_than_seconds: float, limit: int
) -> list[RunPlace]:
    """The places of pending runs due to start, waiting longer than the threshold, first
    of their thread."""
    dialect = dialect_name(session)
    stmt = (
        select(runs.c.run_id, runs.c.priority, runs.c.fairness_group)
        .where(
            runs.c.updated_at < clock_plus(dialect, "p_age"),
            *run_claims.claimable_conditions(dialect),
        )
        .order_by(runs.c.created_at)
        .limit(limit)
    )
    params = {"p_age": seconds_param(dialect, -older_than_seconds)}
    rows = (await session.execute(stmt, params)).mappings().all()
    return [RunPlace.from_row(row) for row in rows]


async def pending_among(session: AsyncConnection, run_ids: list[str]) -> set[str]:
    """Which of these runs are still pending."""
    stmt = select(runs.c.run_id).where(
        runs.c.run_id.in_(run_ids), runs.c.status == RunStatus.PENDING
    )
    return {str(run_id) for run_id in (await session.execute(stmt)).scalars()}
