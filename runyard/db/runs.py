"""SQL statements for runs, including claims, fenced writes, leases and recovery."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

from sqlalchemy import (
    Boolean,
    Insert,
    Select,
    Update,
    and_,
    bindparam,
    case,
    column,
    delete,
    exists,
    func,
    insert,
    literal_column,
    or_,
    select,
    table,
    true,
    tuple_,
    update,
)
from sqlalchemy.dialects import postgresql
from sqlalchemy.engine import RowMapping
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.orm import aliased

from runyard.db import threads as threads_db
from runyard.db.dialect import (
    clock,
    clock_plus,
    db_now,
    dialect_name,
    rowcount,
    seconds_param,
)
from runyard.db.driver import Row, fetch_all, fetch_one
from runyard.db.tables import runs, threads
from runyard.domain.status import ACTIVE_RUN_STATUSES, RunStatus

_ACTIVE = [s.value for s in ACTIVE_RUN_STATUSES]

# The statements every run executes are built once per dialect and reused with bound
# parameters: building a statement costs more CPU than sending it.


@cache
def _insert_run_statement(dialect: str) -> Insert:
    now = clock(dialect)
    # A run is ordered by its start time, as LangGraph's server orders it: a delayed run's
    # `created_at` is when it becomes due (`scheduled_at`), so a run due sooner goes first.
    starts = func.coalesce(bindparam("p_starts_at", type_=runs.c.created_at.type), now)
    return insert(runs).values(created_at=starts, updated_at=now).returning(*runs.c)


@cache
def _get_run_statement(dialect: str, in_thread: bool) -> Select[Any]:
    stmt = select(runs).where(runs.c.run_id == bindparam("p_run_id"))
    if in_thread:
        stmt = stmt.where(runs.c.thread_id == bindparam("p_thread_id"))
    return stmt


async def insert_run(session: AsyncConnection, row: dict[str, Any]) -> dict[str, Any]:
    """Insert a pending run and return it as stored."""
    params = {**row, "p_starts_at": row.get("scheduled_at")}
    stored = await fetch_one(session, _insert_run_statement(dialect_name(session)), params)
    assert stored is not None  # an INSERT … RETURNING without conflict handling
    return stored


async def insert_run_on_new_thread(
    session: AsyncConnection, thread: dict[str, Any], run: dict[str, Any]
) -> dict[str, Any] | None:
    """Insert a thread (busy) and its first pending run; None, with nothing written, when
    the thread already exists.

    One statement on PostgreSQL (the thread insert is a data-modifying CTE that the run
    insert selects from), two on SQLite: run it in `Runtime.atomic`.
    """
    dialect = dialect_name(session)
    if dialect != "postgresql":
        if await threads_db.insert_thread(session, thread) is None:
            return None
        return await insert_run(session, run)
    statement = _insert_on_new_thread_statement(tuple(thread), tuple(run))
    params = {f"t_{key}": value for key, value in thread.items()}
    params.update({f"r_{key}": value for key, value in run.items() if key != "thread_id"})
    return await fetch_one(session, statement, params)


@cache
def _insert_on_new_thread_statement(thread_keys: tuple[str, ...], run_keys: tuple[str, ...]) -> Any:
    now = clock("postgresql")
    thread_values: dict[str, Any] = {
        key: bindparam(f"t_{key}", type_=threads.c[key].type) for key in thread_keys
    }
    new_thread = (
        postgresql.insert(threads)
        .values({**thread_values, "created_at": now, "updated_at": now, "state_updated_at": now})
        .on_conflict_do_nothing()
        .returning(threads.c.thread_id)
        .cte("new_thread")
    )
    columns = [key for key in run_keys if key != "thread_id"]
    source = select(
        *(bindparam(f"r_{key}", type_=runs.c[key].type) for key in columns),
        new_thread.c.thread_id,
        now,
        now,
    )
    return (
        insert(runs)
        .from_select([*columns, "thread_id", "created_at", "updated_at"], source)
        .returning(*runs.c)
        .add_cte(new_thread)
    )


async def get_run(
    session: AsyncConnection, run_id: str, thread_id: str | None = None
) -> dict[str, Any] | None:
    """A run by id (within a thread when given)."""
    stmt = _get_run_statement(dialect_name(session), thread_id is not None)
    params = {"p_run_id": run_id}
    if thread_id is not None:
        params["p_thread_id"] = thread_id
    return await fetch_one(session, stmt, params)


async def get_run_by_idempotency_key(session: AsyncConnection, key: str) -> RowMapping | None:
    """The run created under an Idempotency-Key."""
    stmt = select(runs).where(runs.c.idempotency_key == key)
    return (await session.execute(stmt)).mappings().one_or_none()


async def list_runs(
    session: AsyncConnection, thread_id: str, limit: int, offset: int, status: str | None
) -> Sequence[RowMapping]:
    """A thread's runs, newest first."""
    stmt = select(runs).where(runs.c.thread_id == thread_id)
    if status is not None:
        stmt = stmt.where(runs.c.status == status)
    stmt = stmt.order_by(runs.c.created_at.desc(), runs.c.run_id.desc()).limit(limit).offset(offset)
    return (await session.execute(stmt)).mappings().all()


@cache
def _thread_for_new_run_statement(dialect: str) -> Select[Any]:
    deleted_with_run = exists().where(
        runs.c.thread_id == threads.c.thread_id,
        runs.c.temporary.is_(True),
        runs.c.on_completion == "delete",
    )
    statement = select(threads, deleted_with_run.label("deleted_with_run")).where(
        threads.c.thread_id == bindparam("p_thread_id")
    )
    if dialect == "postgresql":
        statement = statement.with_for_update(of=threads)
    return statement


async def lock_thread_for_new_run(
    session: AsyncConnection, thread_id: str
) -> dict[str, Any] | None:
    """The thread a run is about to join, locked until the transaction ends (PostgreSQL),
    with `deleted_with_run`: True when a stateless run deletes the thread once it ends.

    The stateless run was committed with its thread, so any read that finds the thread
    finds that run too, however it has ended meanwhile.
    """
    statement = _thread_for_new_run_statement(dialect_name(session))
    row = (await session.execute(statement, {"p_thread_id": thread_id})).mappings().one_or_none()
    return dict(row) if row is not None else None


@cache
def _runs_after_statement(after: bool, limit: int) -> Any:
    stmt = select(runs).where(runs.c.thread_id == bindparam("p_thread_id"))
    if after:
        created_at = bindparam("p_created_at", type_=runs.c.created_at.type)
        stmt = stmt.where(
            or_(
                runs.c.created_at > created_at,
                and_(
                    runs.c.created_at == created_at,
                    runs.c.run_id > bindparam("p_run_id", type_=runs.c.run_id.type),
                ),
            )
        )
    return stmt.order_by(runs.c.created_at, runs.c.run_id).limit(limit)


async def runs_created_after(
    session: AsyncConnection, thread_id: str, after: tuple[Any, str] | None, limit: int
) -> list[Row]:
    """The thread's runs created after (created_at, run_id), oldest first (from the first
    when None), at most `limit`. Built once per page size: thread streams and sessions poll
    it, so on PostgreSQL it takes the statement pool (`fetch_all`)."""
    params: dict[str, Any] = {"p_thread_id": thread_id}
    if after is not None:
        params["p_created_at"], params["p_run_id"] = after
    return await fetch_all(session, _runs_after_statement(after is not None, limit), params)


async def latest_run(session: AsyncConnection, thread_id: str) -> RowMapping | None:
    """The thread's newest run."""
    stmt = (
        select(runs)
        .where(runs.c.thread_id == thread_id)
        .order_by(runs.c.created_at.desc(), runs.c.run_id.desc())
        .limit(1)
    )
    return (await session.execute(stmt)).mappings().first()


async def active_runs(session: AsyncConnection, thread_id: str) -> Sequence[RowMapping]:
    """The thread's pending and running runs, oldest first."""
    stmt = (
        select(runs)
        .where(runs.c.thread_id == thread_id, runs.c.status.in_(_ACTIVE))
        .order_by(runs.c.created_at, runs.c.run_id)
    )
    return (await session.execute(stmt)).mappings().all()


def _claimable(session: AsyncConnection) -> list[Any]:
    """Conditions of a run that may start now: pending, due, first of its idle thread."""
    return _claimable_in(dialect_name(session))


def _claimable_in(dialect: str) -> list[Any]:
    other = aliased(runs)
    now = clock(dialect)
    blocked = exists().where(
        other.c.thread_id == runs.c.thread_id,
        or_(
            other.c.status == "running",
            and_(
                other.c.status == "pending",
                or_(
                    other.c.created_at < runs.c.created_at,
                    and_(other.c.created_at == runs.c.created_at, other.c.run_id < runs.c.run_id),
                ),
            ),
        ),
    )
    return [
        runs.c.status == "pending",
        or_(runs.c.scheduled_at.is_(None), runs.c.scheduled_at <= now),
        ~blocked,
    ]


def _thread_locked_first(dialect: str) -> list[Any]:
    """On PostgreSQL, a condition that locks the run's thread row before the statement
    locks the run row (runyard/lifecycle.py: the thread row, then its run rows).

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
# its first read (runyard/graphs/checkpointer.py, `fenced`).
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
            *_thread_locked_first(dialect),
            *_claimable_in(dialect),
        )
        .values(
            status="running",
            owner=bindparam("p_owner"),
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
            .values(status="busy", updated_at=now)
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
        .values(status="busy", updated_at=now)
    )
    return claim, busy


@cache
def _placing_statement(dialect: str) -> Select[Any]:
    return select(runs.c.fairness_group, runs.c.priority).where(
        runs.c.run_id == bindparam("p_run_id"), *_claimable_in(dialect)
    )


async def claimable_run_placing(session: AsyncConnection, run_id: str) -> tuple[str, int] | None:
    """The fairness group and priority of a run that may be claimed now; None otherwise."""
    row = await fetch_one(session, _placing_statement(dialect_name(session)), {"p_run_id": run_id})
    if row is None:
        return None
    return str(row["fairness_group"]), int(row["priority"])


async def claim_run(
    session: AsyncConnection, run_id: str, owner: str, lease_seconds: float
) -> dict[str, Any] | None:
    """Atomically take a pending run: owner, lease from the database clock, next attempt.

    Only the thread's oldest pending run can be claimed, and only while no other run of
    the thread is running, so a thread's runs execute one at a time in order. One
    statement on PostgreSQL, two on SQLite: run it in `Runtime.atomic`. On PostgreSQL the
    row also carries THREAD_HAS_CHECKPOINT.
    """
    dialect = dialect_name(session)
    claim, busy = _claim_statements(dialect)
    params = {
        "p_run_id": run_id,
        "p_owner": owner,
        "p_lease": seconds_param(dialect, lease_seconds),
    }
    row = await fetch_one(session, claim, params)
    if row is not None and busy is not None:
        await session.execute(busy, {"p_thread_id": row["thread_id"]})
    return row


@cache
def _finish_statement(dialect: str) -> Update:
    now = clock(dialect)
    return (
        update(runs)
        .where(
            runs.c.run_id == bindparam("p_run_id"),
            *_thread_locked_first(dialect),
            runs.c.attempt == bindparam("p_attempt"),
            runs.c.status == "running",
            # A cancel recorded before this write wins: only the cancel's own end (an
            # interrupted run) is written over it (runyard/lifecycle.py, `finish`).
            or_(runs.c.cancel_action.is_(None), bindparam("p_by_cancel", type_=Boolean)),
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
) -> bool:
    """Record a run's end, only if `attempt` still holds it (the fencing check) and no
    cancel was recorded, unless this is that cancel's end (`status` interrupted)."""
    params = _finish_params(run_id, attempt, status, output, error)
    result = await session.execute(_finish_statement(dialect_name(session)), params)
    return rowcount(result) > 0


def _finish_params(
    run_id: str, attempt: int, status: RunStatus, output: Any, error: Any
) -> dict[str, Any]:
    return {
        "p_run_id": run_id,
        "p_attempt": attempt,
        "p_status": status.value,
        "p_by_cancel": status is RunStatus.INTERRUPTED,
        "p_output": output,
        "p_error": error,
    }


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
    upcoming: dict[str, Any] | None = None
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
) -> Finished:
    """`finish_run`, and with it the thread's cached state (busy while a run is pending).

    Nothing is written unless `attempt` still holds the run. On PostgreSQL one statement,
    which also reads the thread's next run (see `_finish_with_state_statement`); on SQLite
    two, in the transaction of `Runtime.atomic`.
    """
    dialect = dialect_name(session)
    if dialect != "postgresql":
        if not await finish_run(session, run_id, attempt, status, output, error):
            return Finished(held=False)
        await threads_db.set_state_fields(session, thread, busy_if_pending=True, ending_run=run_id)
        return Finished(held=True, thread_written=True)
    params = {
        **_finish_params(run_id, attempt, status, output, error),
        **threads_db.state_params(thread),
    }
    row = await fetch_one(session, _finish_with_state_statement(dialect), params)
    if row is None:
        return Finished(held=False)
    if not row["thread_written"]:
        return Finished(held=True)
    upcoming = None
    if row["run_id"] is not None:
        upcoming = {
            "run_id": row["run_id"],
            "scheduled_at": row["scheduled_at"],
            "priority": row["priority"],
            "fairness_group": row["fairness_group"],
        }
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
            *_thread_locked_first(dialect),
            runs.c.attempt == bindparam("p_attempt"),
            runs.c.status == "running",
            runs.c.cancel_action.is_(None),
        )
        .values(
            status="pending",
            owner=None,
            lease_expires_at=None,
            handovers=runs.c.handovers + bindparam("p_handover"),
            updated_at=clock(dialect),
        )
    )


async def cancel_requested(session: AsyncConnection, run_id: str, attempt: int) -> str | None:
    """The cancel action requested of the run, while `attempt` still holds it."""
    result = await session.execute(
        select(runs.c.cancel_action).where(
            runs.c.run_id == run_id, runs.c.attempt == attempt, runs.c.status == "running"
        )
    )
    action = result.scalar_one_or_none()
    return str(action) if action else None


_STILL_HOLDS = select(runs.c.run_id).where(
    runs.c.run_id == bindparam("p_run_id"),
    runs.c.attempt == bindparam("p_attempt"),
    runs.c.status == "running",
)


async def still_holds(session: AsyncConnection, run_id: str, attempt: int) -> bool:
    """True while `attempt` is the current, running attempt of the run."""
    params = {"p_run_id": run_id, "p_attempt": attempt}
    return (await session.execute(_STILL_HOLDS, params)).first() is not None


_NEXT_PENDING = (
    select(runs.c.run_id, runs.c.scheduled_at, runs.c.priority, runs.c.fairness_group)
    .where(runs.c.thread_id == bindparam("p_thread_id"), runs.c.status == "pending")
    .order_by(runs.c.created_at, runs.c.run_id)
    .limit(1)
)


async def next_pending_run(session: AsyncConnection, thread_id: str) -> dict[str, Any] | None:
    """The thread's oldest pending run."""
    return await fetch_one(session, _NEXT_PENDING, {"p_thread_id": thread_id})


async def interrupt_pending_run(session: AsyncConnection, run_id: str) -> bool:
    """Cancel a run nobody executes yet: it ends `interrupted` at once."""
    now = db_now(session)
    result = await session.execute(
        update(runs)
        .where(runs.c.run_id == run_id, runs.c.status == "pending")
        .values(status="interrupted", ended_at=now, updated_at=now, cancel_action="interrupt")
    )
    return rowcount(result) > 0


async def thread_of_run(session: AsyncConnection, run_id: str) -> str | None:
    """The thread of a run (None: no such run), reading no JSON column."""
    result = await session.execute(select(runs.c.thread_id).where(runs.c.run_id == run_id))
    value = result.scalar()
    return None if value is None else str(value)


async def fail_unclaimed_run(
    session: AsyncConnection, run_id: str, owner: str, error: dict[str, Any]
) -> dict[str, Any] | None:
    """End as `error` a run nobody executes: pending, or running for `owner` whose claim
    committed but could not be read back. The columns its end needs (run id, thread,
    temporary, on_completion, webhook), none of them JSON; None when neither holds."""
    now = db_now(session)
    result = await session.execute(
        update(runs)
        .where(
            runs.c.run_id == run_id,
            or_(
                runs.c.status == "pending",
                and_(runs.c.status == "running", runs.c.owner == owner),
            ),
        )
        .values(
            status="error",
            error=error,
            owner=None,
            lease_expires_at=None,
            ended_at=now,
            updated_at=now,
        )
        .returning(
            runs.c.run_id,
            runs.c.thread_id,
            runs.c.temporary,
            runs.c.on_completion,
            runs.c.webhook,
        )
    )
    row = result.first()
    return None if row is None else dict(row._mapping)


async def request_cancel(session: AsyncConnection, run_id: str, action: str) -> bool:
    """Durably flag a running run for cancellation (picked up by its executor)."""
    result = await session.execute(
        update(runs)
        .where(runs.c.run_id == run_id, runs.c.status == "running")
        .values(cancel_action=action, updated_at=db_now(session))
    )
    return rowcount(result) > 0


async def delete_run(session: AsyncConnection, run_id: str) -> bool:
    """Delete a run row."""
    result = await session.execute(delete(runs).where(runs.c.run_id == run_id))
    return rowcount(result) > 0


async def delete_pending_run(session: AsyncConnection, run_id: str) -> bool:
    """Delete a run only while nobody executes it (pending)."""
    result = await session.execute(
        delete(runs).where(runs.c.run_id == run_id, runs.c.status == "pending")
    )
    return rowcount(result) > 0


async def ended_by(
    session: AsyncConnection, run_id: str, attempt: int, status: RunStatus
) -> dict[str, Any] | None:
    """The run, if `attempt` itself ended it with `status` (its own final write committed)."""
    row = await get_run(session, run_id)
    if row is None or row["attempt"] != attempt or row["status"] != status.value:
        return None
    return row if row["owner"] is None and row["ended_at"] is not None else None


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
            runs.c.status == "running",
        )
        .values(lease_expires_at=clock_plus(dialect, "p_lease"))
        .returning(runs.c.run_id, runs.c.attempt, runs.c.cancel_action)
    )
    params = {"p_attempts": list(attempts), "p_lease": seconds_param(dialect, lease_seconds)}
    return (await session.execute(stmt, params)).mappings().all()


async def requeue_expired(
    session: AsyncConnection, max_attempts: int, every_lease: bool = False
) -> Sequence[RowMapping]:
    """Runs whose lease expired go back to pending (or fail after too many lost attempts).

    An attempt is lost when it neither finished nor was handed back (`handovers`). With
    `every_lease`, every running run counts as expired: the start of a single-process
    instance, whose predecessor held them all and is gone.

    A run that was being cancelled ends `interrupted` instead of running again. The runs
    that ended are returned whole (their ending needs webhook, temporary…); the requeued
    ones as run id, thread id and status.
    """
    now = db_now(session)
    expired = and_(
        runs.c.status == "running", true() if every_lease else runs.c.lease_expires_at < now
    )
    if dialect_name(session) == "postgresql":
        # The threads first, in one order, then their runs (runyard/lifecycle.py).
        await session.execute(
            select(threads.c.thread_id)
            .where(threads.c.thread_id.in_(select(runs.c.thread_id).where(expired)))
            .order_by(threads.c.thread_id)
            .with_for_update()
        )
    # A cancelled run whose worker died is not run again: the cancel was acknowledged.
    cancelled = (
        (
            await session.execute(
                update(runs)
                .where(expired, runs.c.cancel_action.is_not(None))
                .values(
                    status="interrupted",
                    owner=None,
                    lease_expires_at=None,
                    ended_at=now,
                    updated_at=now,
                )
                .returning(*runs.c)
            )
        )
        .mappings()
        .all()
    )
    failed = (
        (
            await session.execute(
                update(runs)
                .where(expired, runs.c.attempt - runs.c.handovers >= max_attempts)
                .values(
                    status="error",
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
        )
        .mappings()
        .all()
    )
    requeued = (
        (
            await session.execute(
                update(runs)
                .where(expired)
                .values(status="pending", owner=None, lease_expires_at=None, updated_at=now)
                .returning(
                    runs.c.run_id,
                    runs.c.thread_id,
                    runs.c.status,
                    runs.c.priority,
                    runs.c.fairness_group,
                )
            )
        )
        .mappings()
        .all()
    )
    # The thread-status rule of runyard/lifecycle.py: busy while a run is pending or running.
    waiting = exists().where(runs.c.thread_id == threads.c.thread_id, runs.c.status.in_(_ACTIVE))
    if cancelled:
        await session.execute(
            update(threads)
            .where(threads.c.thread_id.in_({row["thread_id"] for row in cancelled}))
            .values(status=case((waiting, "busy"), else_="interrupted"), updated_at=now)
        )
    if failed:
        # A failed run leaves its thread in error (busy if another run waits), as finalize
        # does; otherwise the thread would stay busy forever.
        await session.execute(
            update(threads)
            .where(threads.c.thread_id.in_({row["thread_id"] for row in failed}))
            .values(
                status=case((waiting, "busy"), else_="error"),
                error=failed[0]["error"],
                updated_at=now,
            )
        )
    return [*cancelled, *failed, *requeued]


async def pending_run_ids(session: AsyncConnection, limit: int) -> Sequence[RowMapping]:
    """Pending runs, oldest first, with their start time, priority and fairness group."""
    stmt = (
        select(runs.c.run_id, runs.c.scheduled_at, runs.c.priority, runs.c.fairness_group)
        .where(runs.c.status == "pending")
        .order_by(runs.c.created_at)
        .limit(limit)
    )
    return (await session.execute(stmt)).mappings().all()


async def stranded_pending_runs(
    session: AsyncConnection, older_than_seconds: float, limit: int
) -> Sequence[RowMapping]:
    """Pending runs due to start, waiting longer than the threshold, first of their thread
    (with their priority and fairness group)."""
    dialect = dialect_name(session)
    stmt = (
        select(runs.c.run_id, runs.c.priority, runs.c.fairness_group)
        .where(runs.c.updated_at < clock_plus(dialect, "p_age"), *_claimable_in(dialect))
        .order_by(runs.c.created_at)
        .limit(limit)
    )
    params = {"p_age": seconds_param(dialect, -older_than_seconds)}
    return (await session.execute(stmt, params)).mappings().all()


async def pending_among(session: AsyncConnection, run_ids: list[str]) -> set[str]:
    """Which of these runs are still pending."""
    stmt = select(runs.c.run_id).where(runs.c.run_id.in_(run_ids), runs.c.status == "pending")
    return {str(run_id) for run_id in (await session.execute(stmt)).scalars()}


async def find_active_runs(
    session: AsyncConnection,
    thread_id: str | None,
    run_ids: list[str] | None,
    status: str | None,
) -> Sequence[RowMapping]:
    """Active runs chosen by thread, ids and/or status."""
    stmt = select(runs.c.run_id, runs.c.thread_id).where(runs.c.status.in_(_ACTIVE))
    if thread_id is not None:
        stmt = stmt.where(runs.c.thread_id == thread_id)
    if run_ids:
        stmt = stmt.where(runs.c.run_id.in_(run_ids))
    if status in ("pending", "running"):
        stmt = stmt.where(runs.c.status == status)
    return (await session.execute(stmt)).mappings().all()


async def find_claimable_run(
    session: AsyncConnection, skipped_groups: Sequence[str] = ()
) -> str | None:
    """A pending run ready to claim, skipping rows other pollers hold (Redis-down fallback):
    the first by priority, then start time, as the queue orders them; none of the
    `skipped_groups` (held by a cap)."""
    stmt = (
        select(runs.c.run_id)
        .where(*_claimable(session))
        .order_by(runs.c.priority, runs.c.created_at)
        .limit(1)
    )
    if skipped_groups:
        stmt = stmt.where(runs.c.fairness_group.not_in(list(skipped_groups)))
    if dialect_name(session) == "postgresql":
        stmt = stmt.with_for_update(skip_locked=True, of=runs)
    return (await session.execute(stmt)).scalar_one_or_none()
