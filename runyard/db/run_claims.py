"""Claiming a run: which pending runs may start now (due, first of their idle thread), the
claim that takes one for an owner under a lease, and the reads the queues place and pick runs
by. Also the condition that locks a run's thread row before its run row, which every write of
a running run shares (runyard/lifecycle/machine.py: the thread row, then its run rows)."""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import Any

from sqlalchemy import (
    Select,
    Update,
    and_,
    bindparam,
    column,
    exists,
    func,
    or_,
    select,
    table,
    update,
)
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.orm import aliased

from runyard.db.dialect import (
    clock,
    clock_plus,
    dialect_name,
    seconds_param,
)
from runyard.db.driver import fetch_one
from runyard.db.tables import runs, threads
from runyard.domain.run import ClaimedRun, RunRecord
from runyard.domain.status import RunStatus, ThreadStatus


def claimable_conditions(dialect: str) -> list[Any]:
    """Conditions of a run that may start now: pending, due, first of its idle thread."""
    other = aliased(runs)
    now = clock(dialect)
    blocked = exists().where(
        other.c.thread_id == runs.c.thread_id,
        or_(
            other.c.status == RunStatus.RUNNING,
            and_(
                other.c.status == RunStatus.PENDING,
                or_(
                    other.c.created_at < runs.c.created_at,
                    and_(other.c.created_at == runs.c.created_at, other.c.run_id < runs.c.run_id),
                ),
            ),
        ),
    )
    return [
        runs.c.status == RunStatus.PENDING,
        or_(runs.c.scheduled_at.is_(None), runs.c.scheduled_at <= now),
        ~blocked,
    ]


def thread_locked_first(dialect: str) -> list[Any]:
    """On PostgreSQL, a condition that locks the run's thread row before the statement
    locks the run row (runyard/lifecycle/machine.py: the thread row, then its run rows).

    An uncorrelated scalar subquery is an InitPlan: PostgreSQL runs it once, before the
    first row reaches the UPDATE, so the thread's lock is taken first. Elsewhere (SQLite)
    the transitions are serialized in the process instead.
    """
    if dialect != "postgresql":
        return []
    owner = aliased(runs)
    thread_of_run = select(owner.c.thread_id).where(owner.c.run_id == bindparam("p_run_id"))
    locked = (
        select(threads.c.thread_id)
        .where(threads.c.thread_id == thread_of_run.scalar_subquery())
        .with_for_update()
        .scalar_subquery()
    )
    return [runs.c.thread_id == locked]


# The checkpointer's table (langgraph's PostgreSQL saver creates it at start-up). A claim on
# PostgreSQL also says whether the thread has a checkpoint yet (key THREAD_HAS_CHECKPOINT):
# while the run holds its thread nobody else writes one, so a run that finds none can skip
# its first read (runyard/checkpoints/checkpointer.py, `fenced`).
_CHECKPOINTS = table("checkpoints", column("thread_id"), column("checkpoint_ns"))


THREAD_HAS_CHECKPOINT = "thread_has_checkpoint"


@cache
def _claim_statements(dialect: str) -> tuple[Any, Update | None]:
    """The claim, and the thread update that goes with it.

    On PostgreSQL both are one statement (the claim is a data-modifying CTE), so a claim
    needs no explicit transaction there.
    """
    now = clock(dialect)
    claim = (
        update(runs)
        .where(
            runs.c.run_id == bindparam("p_run_id"),
            *thread_locked_first(dialect),
            *claimable_conditions(dialect),
        )
        .values(
            status=RunStatus.RUNNING,
            owner=bindparam("p_owner"),
            last_owner=bindparam("p_owner"),
            attempt=runs.c.attempt + 1,
            lease_expires_at=clock_plus(dialect, "p_lease"),
            started_at=func.coalesce(runs.c.started_at, now),
            updated_at=now,
            held_back=None,
        )
        .returning(*runs.c)
    )
    if dialect == "postgresql":
        claimed = claim.cte("claimed")
        busy_thread = (
            update(threads)
            .where(threads.c.thread_id == claimed.c.thread_id)
            .values(status=ThreadStatus.BUSY, updated_at=now)
            .returning(threads.c.thread_id)
            .cte("busy_thread")
        )
        has_checkpoint = exists().where(
            _CHECKPOINTS.c.thread_id == claimed.c.thread_id, _CHECKPOINTS.c.checkpoint_ns == ""
        )
        claim_and_look = select(claimed, has_checkpoint.label(THREAD_HAS_CHECKPOINT))
        return claim_and_look.add_cte(busy_thread), None
    busy = (
        update(threads)
        .where(threads.c.thread_id == bindparam("p_thread_id"))
        .values(status=ThreadStatus.BUSY, updated_at=now)
    )
    return claim, busy


@cache
def _placing_statement(dialect: str) -> Select[Any]:
    return select(runs.c.fairness_group, runs.c.priority).where(
        runs.c.run_id == bindparam("p_run_id"), *claimable_conditions(dialect)
    )


async def claimable_run_placing(session: AsyncConnection, run_id: str) -> tuple[str, int] | None:
    """The fairness group and priority of a run that may be claimed now; None otherwise."""
    row = await fetch_one(session, _placing_statement(dialect_name(session)), {"p_run_id": run_id})
    if row is None:
        return None
    return str(row["fairness_group"]), int(row["priority"])


async def claim_run(
    session: AsyncConnection, run_id: str, owner: str, lease_seconds: float
) -> ClaimedRun | None:
    """Atomically take a pending run: owner, lease from the database clock, next attempt.

    Only the thread's oldest pending run can be claimed, and only while no other run of
    the thread is running, so a thread's runs execute one at a time in order. One
    statement on PostgreSQL, two on SQLite: run it in `Databases.atomic`. On PostgreSQL the
    claim also says whether the thread has a checkpoint yet.
    """
    dialect = dialect_name(session)
    claim, busy = _claim_statements(dialect)
    params = {
        "p_run_id": run_id,
        "p_owner": owner,
        "p_lease": seconds_param(dialect, lease_seconds),
    }
    row = await fetch_one(session, claim, params)
    if row is None:
        return None
    if busy is not None:
        await session.execute(busy, {"p_thread_id": row["thread_id"]})
    return ClaimedRun(RunRecord.from_row(row), row.get(THREAD_HAS_CHECKPOINT))


async def find_claimable_run(
    session: AsyncConnection, skipped_groups: Sequence[str] = ()
) -> str | None:
    """A pending run ready to claim, skipping rows other pollers hold (Redis-down fallback):
    the first by priority, then start time, as the queue orders them; none of the
    `skipped_groups` (held by a cap)."""
    stmt = (
        select(runs.c.run_id)
        .where(*claimable_conditions(dialect_name(session)))
        .order_by(runs.c.priority, runs.c.created_at)
        .limit(1)
    )
    if skipped_groups:
        stmt = stmt.where(runs.c.fairness_group.not_in(list(skipped_groups)))
    if dialect_name(session) == "postgresql":
        stmt = stmt.with_for_update(skip_locked=True, of=runs)
    return (await session.execute(stmt)).scalar_one_or_none()
