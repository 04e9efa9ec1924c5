"""Statements on runs as rows: inserting a run, reading runs, deleting them, and the writes
that need no attempt to hold the run (a pending run interrupted or failed, a cancel flagged).
A run's claim is in `run_claims`, the writes fenced by the attempt that holds a run (its end,
its release, its lease) in `run_attempts`, and the reaper's recovery in `run_recovery`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import cache
from typing import Any

from sqlalchemy import (
    Insert,
    Select,
    and_,
    bindparam,
    delete,
    exists,
    func,
    insert,
    or_,
    select,
    update,
)
from sqlalchemy.dialects import postgresql
from sqlalchemy.ext.asyncio import AsyncConnection

from runyard.db import threads as threads_db
from runyard.db.dialect import (
    clock,
    db_now,
    dialect_name,
    rowcount,
)
from runyard.db.driver import fetch_all, fetch_one
from runyard.db.tables import runs, threads
from runyard.domain.run import UNREAD_COLUMNS, RunRecord, UnreadRun, run_or_none
from runyard.domain.status import ACTIVE_RUN_STATUSES, CancelAction, RunStatus
from runyard.domain.thread import LockedThread

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


async def insert_run(session: AsyncConnection, row: dict[str, Any]) -> RunRecord:
    """Insert a pending run and return it as stored."""
    params = {**row, "p_starts_at": row.get("scheduled_at")}
    stored = await fetch_one(session, _insert_run_statement(dialect_name(session)), params)
    assert stored is not None  # an INSERT … RETURNING without conflict handling
    return RunRecord.from_row(stored)


async def insert_run_on_new_thread(
    session: AsyncConnection, thread: dict[str, Any], run: dict[str, Any]
) -> RunRecord | None:
    """Insert a thread (busy) and its first pending run; None, with nothing written, when
    the thread already exists.

    One statement on PostgreSQL (the thread insert is a data-modifying CTE that the run
    insert selects from), two on SQLite: run it in `Databases.atomic`.
    """
    dialect = dialect_name(session)
    if dialect != "postgresql":
        if await threads_db.insert_thread(session, thread) is None:
            return None
        return await insert_run(session, run)
    statement = _insert_on_new_thread_statement(tuple(thread), tuple(run))
    params = {f"t_{key}": value for key, value in thread.items()}
    params.update({f"r_{key}": value for key, value in run.items() if key != "thread_id"})
    return run_or_none(await fetch_one(session, statement, params))


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
) -> RunRecord | None:
    """A run by id (within a thread when given)."""
    stmt = _get_run_statement(dialect_name(session), thread_id is not None)
    params = {"p_run_id": run_id}
    if thread_id is not None:
        params["p_thread_id"] = thread_id
    return run_or_none(await fetch_one(session, stmt, params))


async def get_run_by_idempotency_key(session: AsyncConnection, key: str) -> RunRecord | None:
    """The run created under an Idempotency-Key."""
    stmt = select(runs).where(runs.c.idempotency_key == key)
    return run_or_none((await session.execute(stmt)).mappings().one_or_none())


async def list_runs(
    session: AsyncConnection, thread_id: str, limit: int, offset: int, status: str | None
) -> list[RunRecord]:
    """A thread's runs, newest first."""
    stmt = select(runs).where(runs.c.thread_id == thread_id)
    if status is not None:
        stmt = stmt.where(runs.c.status == status)
    stmt = stmt.order_by(runs.c.created_at.desc(), runs.c.run_id.desc()).limit(limit).offset(offset)
    return _records((await session.execute(stmt)).mappings().all())


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


async def lock_thread_for_new_run(session: AsyncConnection, thread_id: str) -> LockedThread | None:
    """The thread a run is about to join, locked until the transaction ends (PostgreSQL),
    with `deleted_with_run`: True when a stateless run deletes the thread once it ends.

    The stateless run was committed with its thread, so any read that finds the thread
    finds that run too, however it has ended meanwhile.
    """
    statement = _thread_for_new_run_statement(dialect_name(session))
    row = (await session.execute(statement, {"p_thread_id": thread_id})).mappings().one_or_none()
    return LockedThread.from_row(row) if row is not None else None


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
) -> list[RunRecord]:
    """The thread's runs created after (created_at, run_id), oldest first (from the first
    when None), at most `limit`. Built once per page size: thread streams and sessions poll
    it, so on PostgreSQL it takes the statement pool (`fetch_all`)."""
    params: dict[str, Any] = {"p_thread_id": thread_id}
    if after is not None:
        params["p_created_at"], params["p_run_id"] = after
    return _records(
        await fetch_all(session, _runs_after_statement(after is not None, limit), params)
    )


async def latest_run(session: AsyncConnection, thread_id: str) -> RunRecord | None:
    """The thread's newest run."""
    stmt = (
        select(runs)
        .where(runs.c.thread_id == thread_id)
        .order_by(runs.c.created_at.desc(), runs.c.run_id.desc())
        .limit(1)
    )
    return run_or_none((await session.execute(stmt)).mappings().first())


async def active_runs(session: AsyncConnection, thread_id: str) -> list[RunRecord]:
    """The thread's pending and running runs, oldest first."""
    stmt = (
        select(runs)
        .where(runs.c.thread_id == thread_id, runs.c.status.in_(_ACTIVE))
        .order_by(runs.c.created_at, runs.c.run_id)
    )
    return _records((await session.execute(stmt)).mappings().all())


async def thread_of_run(session: AsyncConnection, run_id: str) -> str | None:
    """The thread of a run (None: no such run), reading no JSON column."""
    result = await session.execute(select(runs.c.thread_id).where(runs.c.run_id == run_id))
    value = result.scalar()
    return None if value is None else str(value)


async def find_active_runs(
    session: AsyncConnection,
    thread_id: str | None,
    run_ids: list[str] | None,
    status: str | None,
) -> list[tuple[str, str]]:
    """Active runs chosen by thread, ids and/or status, as (thread id, run id)."""
    stmt = select(runs.c.run_id, runs.c.thread_id).where(runs.c.status.in_(_ACTIVE))
    if thread_id is not None:
        stmt = stmt.where(runs.c.thread_id == thread_id)
    if run_ids:
        stmt = stmt.where(runs.c.run_id.in_(run_ids))
    if status in ACTIVE_RUN_STATUSES:
        stmt = stmt.where(runs.c.status == status)
    return [(str(thread), str(run)) for run, thread in (await session.execute(stmt)).all()]


async def interrupt_pending_run(session: AsyncConnection, run_id: str) -> bool:
    """Cancel a run nobody executes yet: it ends `interrupted` at once."""
    now = db_now(session)
    result = await session.execute(
        update(runs)
        .where(runs.c.run_id == run_id, runs.c.status == RunStatus.PENDING)
        .values(
            status=RunStatus.INTERRUPTED,
            ended_at=now,
            updated_at=now,
            cancel_action=CancelAction.INTERRUPT,
        )
    )
    return rowcount(result) > 0


async def fail_unclaimed_run(
    session: AsyncConnection, run_id: str, owner: str, error: dict[str, Any]
) -> UnreadRun | None:
    """End as `error` a run nobody executes: pending, or running for `owner` whose claim
    committed but could not be read back. The columns its end needs, none of them JSON
    (what could not be read); None when neither holds."""
    now = db_now(session)
    result = await session.execute(
        update(runs)
        .where(
            runs.c.run_id == run_id,
            or_(
                runs.c.status == RunStatus.PENDING,
                and_(runs.c.status == RunStatus.RUNNING, runs.c.owner == owner),
            ),
        )
        .values(
            status=RunStatus.ERROR,
            error=error,
            owner=None,
            lease_expires_at=None,
            ended_at=now,
            updated_at=now,
        )
        .returning(*(runs.c[name] for name in UNREAD_COLUMNS))
    )
    row = result.mappings().first()
    return None if row is None else UnreadRun.from_row(row)


async def stop_state(
    session: AsyncConnection, run_id: str
) -> tuple[RunStatus, CancelAction | None] | None:
    """The run's status and the stop recorded for it (None: no such run)."""
    result = await session.execute(
        select(runs.c.status, runs.c.cancel_action).where(runs.c.run_id == run_id)
    )
    row = result.first()
    if row is None:
        return None
    return RunStatus(row.status), CancelAction(row.cancel_action) if row.cancel_action else None


async def request_cancel(session: AsyncConnection, run_id: str, action: CancelAction) -> bool:
    """Durably flag a running run for cancellation (picked up by its executor): `action`
    replaces the stop recorded before (the lifecycle gives the stronger of the two)."""
    result = await session.execute(
        update(runs)
        .where(runs.c.run_id == run_id, runs.c.status == RunStatus.RUNNING)
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
        delete(runs).where(runs.c.run_id == run_id, runs.c.status == RunStatus.PENDING)
    )
    return rowcount(result) > 0


def _records(rows: Sequence[Mapping[Any, Any]]) -> list[RunRecord]:
    return [RunRecord.from_row(row) for row in rows]
