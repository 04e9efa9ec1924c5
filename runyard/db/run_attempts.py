"""Statements an attempt issues while it holds its run, each fenced by the attempt number: its
end (alone or with its thread's state), its release back to the queue, its lease renewals,
and the reads that tell it whether it still holds the run or was asked to cancel."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

from sqlalchemy import (
    Integer,
    Update,
    bindparam,
    case,
    exists,
    literal_column,
    or_,
    select,
    true,
    tuple_,
    update,
)
from sqlalchemy.engine import RowMapping
from sqlalchemy.ext.asyncio import AsyncConnection

from runyard.db import run_claims
from runyard.db import runs as runs_db
from runyard.db import threads as threads_db
from runyard.db.dialect import (
    clock,
    clock_plus,
    dialect_name,
    rowcount,
    seconds_param,
)
from runyard.db.driver import fetch_one
from runyard.db.tables import runs, threads
from runyard.domain.run import RunPlace, RunRecord
from runyard.domain.status import CancelAction, RunStatus


@cache
def _finish_statement(dialect: str) -> Update:
    now = clock(dialect)
    return (
        update(runs)
        .where(
            runs.c.run_id == bindparam("p_run_id"),
            *run_claims.thread_locked_first(dialect),
            runs.c.attempt == bindparam("p_attempt"),
            runs.c.status == RunStatus.RUNNING,
            # A stop recorded before this write wins: only an end that carries that stop, or
            # a stronger one, is written over it (runyard/lifecycle/stops.py, `ends_over`).
            or_(
                runs.c.cancel_action.is_(None),
                stop_strength(runs.c.cancel_action) <= bindparam("p_stop", type_=Integer),
            ),
        )
        .values(
            status=bindparam("p_status"),
            output=bindparam("p_output", type_=runs.c.output.type),
            error=bindparam("p_error", type_=runs.c.error.type),
            owner=None,
            lease_expires_at=None,
            ended_at=now,
            updated_at=now,
        )
    )


async def finish_run(
    session: AsyncConnection,
    run_id: str,
    attempt: int,
    status: RunStatus,
    output: Any,
    error: Any,
    stop: CancelAction | None = None,
) -> bool:
    """Record a run's end, only if `attempt` still holds it (the fencing check) and no stop
    stronger than the one this end carries (`stop`: the stop it carries out) was recorded."""
    params = _finish_params(run_id, attempt, status, output, error, stop)
    result = await session.execute(_finish_statement(dialect_name(session)), params)
    return rowcount(result) > 0


def _finish_params(
    run_id: str, attempt: int, status: RunStatus, output: Any, error: Any, stop: CancelAction | None
) -> dict[str, Any]:
    return {
        "p_run_id": run_id,
        "p_attempt": attempt,
        "p_status": status.value,
        "p_stop": stop.strength if stop is not None else 0,
        "p_output": output,
        "p_error": error,
    }


def stop_strength(action: Any) -> Any:
    """The strength of the stop a `cancel_action` column holds, in SQL (CancelAction's
    order); an unknown one outranks every stop."""
    return case({item.value: item.strength for item in CancelAction}, value=action, else_=99)


@dataclass(frozen=True)
class Finished:
    """What `finish_run_with_state` did.

    `held`: the attempt still held the run, and its end is recorded. `thread_written`: the
    thread's state was written too. `upcoming_known`: `upcoming` (the thread's oldest
    pending run, or None) and `now` (the database clock) can be trusted for dispatch;
    otherwise the caller writes the thread state itself if needed and looks again.
    """

    held: bool
    thread_written: bool = False
    upcoming_known: bool = False
    upcoming: RunPlace | None = None
    now: Any = None


@cache
def _finish_with_state_statement(dialect: str) -> Any:
    """End the run, write its thread's state, and read the thread's next run: one statement.

    The statement reads with one snapshot, taken when it starts. A run committed on the
    thread after that (its creator holds the thread row while it inserts, then marks the
    thread busy) would be missing from it: so the thread is written only if its row is
    still the version the snapshot saw (`xmin`, checked again on the newest version after
    waiting for a creator's lock). Then no such run exists, and the next run read here is
    exact; creators that come later wait for this statement's commit and dispatch their
    own run. When the row moved, the run is still ended, and the caller finishes the rest
    with fresh statements.
    """
    finished = _finish_statement(dialect).returning(runs.c.thread_id).cte("finished")
    seen = threads.alias("seen")
    seen_version = (
        select(literal_column("seen.xmin"))
        .select_from(seen)
        .where(seen.c.thread_id == bindparam("p_thread_id"))
        .scalar_subquery()
    )
    written = (
        threads_db.state_statement(dialect, True)
        .where(
            threads.c.thread_id == finished.c.thread_id,
            literal_column("threads.xmin") == seen_version,
        )
        .returning(threads.c.thread_id)
        .cte("written")
    )
    upcoming = _NEXT_PENDING.subquery("upcoming")
    return select(
        finished.c.thread_id,
        exists(select(written.c.thread_id)).label("thread_written"),
        upcoming.c.run_id,
        upcoming.c.scheduled_at,
        upcoming.c.priority,
        upcoming.c.fairness_group,
        clock(dialect).label("now"),
    ).select_from(finished.outerjoin(upcoming, true()))


async def finish_run_with_state(
    session: AsyncConnection,
    run_id: str,
    attempt: int,
    status: RunStatus,
    output: Any,
    error: Any,
    thread: threads_db.ThreadState,
    stop: CancelAction | None = None,
) -> Finished:
    """`finish_run`, and with it the thread's cached state (busy while a run is pending).

    Nothing is written unless `attempt` still holds the run. On PostgreSQL one statement,
    which also reads the thread's next run (see `_finish_with_state_statement`); on SQLite
    two, in the transaction of `Databases.atomic`.
    """
    dialect = dialect_name(session)
    if dialect != "postgresql":
        if not await finish_run(session, run_id, attempt, status, output, error, stop):
            return Finished(held=False)
        await threads_db.set_state_fields(session, thread, busy_if_pending=True, ending_run=run_id)
        return Finished(held=True, thread_written=True)
    params = {
        **_finish_params(run_id, attempt, status, output, error, stop),
        **threads_db.state_params(thread),
    }
    row = await fetch_one(session, _finish_with_state_statement(dialect), params)
    if row is None:
        return Finished(held=False)
    if not row["thread_written"]:
        return Finished(held=True)
    upcoming = RunPlace.from_row(row) if row["run_id"] is not None else None
    return Finished(True, True, True, upcoming, row["now"])


async def release_run(
    session: AsyncConnection, run_id: str, attempt: int, counted: bool = False
) -> bool:
    """Hand a running run back to the queue, only if `attempt` still holds it and no cancel
    was requested (a cancelled run is ended by its attempt instead: `cancel_requested`).

    A handover (shutdown, the store away) is not a lost attempt: it is counted apart
    (`handovers`), so it uses up no retry. A `counted` one (the attempt failed) does.
    """
    result = await session.execute(
        _release_statement(dialect_name(session)),
        {"p_run_id": run_id, "p_attempt": attempt, "p_handover": 0 if counted else 1},
    )
    return rowcount(result) > 0


@cache
def _release_statement(dialect: str) -> Update:
    return (
        update(runs)
        .where(
            runs.c.run_id == bindparam("p_run_id"),
            *run_claims.thread_locked_first(dialect),
            runs.c.attempt == bindparam("p_attempt"),
            runs.c.status == RunStatus.RUNNING,
            runs.c.cancel_action.is_(None),
        )
        .values(
            status=RunStatus.PENDING,
            owner=None,
            lease_expires_at=None,
            handovers=runs.c.handovers + bindparam("p_handover"),
            updated_at=clock(dialect),
        )
    )


async def cancel_requested(
    session: AsyncConnection, run_id: str, attempt: int
) -> CancelAction | None:
    """The stop recorded for the run (the strongest asked), while `attempt` still holds it."""
    result = await session.execute(
        select(runs.c.cancel_action).where(
            runs.c.run_id == run_id, runs.c.attempt == attempt, runs.c.status == RunStatus.RUNNING
        )
    )
    action = result.scalar_one_or_none()
    return CancelAction(action) if action else None


_STILL_HOLDS = select(runs.c.run_id).where(
    runs.c.run_id == bindparam("p_run_id"),
    runs.c.attempt == bindparam("p_attempt"),
    runs.c.status == RunStatus.RUNNING,
)


async def still_holds(session: AsyncConnection, run_id: str, attempt: int) -> bool:
    """True while `attempt` is the current, running attempt of the run."""
    params = {"p_run_id": run_id, "p_attempt": attempt}
    return (await session.execute(_STILL_HOLDS, params)).first() is not None


_NEXT_PENDING = (
    select(runs.c.run_id, runs.c.scheduled_at, runs.c.priority, runs.c.fairness_group)
    .where(runs.c.thread_id == bindparam("p_thread_id"), runs.c.status == RunStatus.PENDING)
    .order_by(runs.c.created_at, runs.c.run_id)
    .limit(1)
)


async def next_pending_run(session: AsyncConnection, thread_id: str) -> RunPlace | None:
    """The place of the thread's oldest pending run."""
    row = await fetch_one(session, _NEXT_PENDING, {"p_thread_id": thread_id})
    return None if row is None else RunPlace.from_row(row)


async def ended_by(
    session: AsyncConnection, run_id: str, attempt: int, status: RunStatus
) -> RunRecord | None:
    """The run, if `attempt` itself ended it with `status` (its own final write committed)."""
    run = await runs_db.get_run(session, run_id)
    if run is None or run.attempt != attempt or run.status != status:
        return None
    return run if run.owner is None and run.ended_at is not None else None


async def extend_leases(
    session: AsyncConnection,
    owner: str,
    attempts: Sequence[tuple[str, int]],
    lease_seconds: float,
) -> Sequence[RowMapping]:
    """Renew the leases of exactly these (run id, attempt) pairs, in one statement.

    Only attempts this owner executes are named, so a run whose task ended without
    finishing is not kept alive by its instance. Returns the renewed rows with their
    cancel flags.
    """
    if not attempts:
        return []
    dialect = dialect_name(session)
    stmt = (
        update(runs)
        .where(
            tuple_(runs.c.run_id, runs.c.attempt).in_(bindparam("p_attempts", expanding=True)),
            runs.c.owner == owner,
            runs.c.status == RunStatus.RUNNING,
        )
        .values(lease_expires_at=clock_plus(dialect, "p_lease"))
        .returning(runs.c.run_id, runs.c.attempt, runs.c.cancel_action)
    )
    params = {"p_attempts": list(attempts), "p_lease": seconds_param(dialect, lease_seconds)}
    return (await session.execute(stmt, params)).mappings().all()
