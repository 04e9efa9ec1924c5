"""SQL statements for threads: rows, filters, metadata and the state the thread row caches."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Select,
    Update,
    and_,
    bindparam,
    case,
    delete,
    exists,
    func,
    or_,
    select,
    update,
)
from sqlalchemy.ext.asyncio import AsyncConnection

from runyard.db.dialect import (
    clock,
    clock_plus,
    dialect_name,
    insert_ignoring,
    json_contains,
    json_filter,
    rowcount,
    seconds_param,
)
from runyard.db.driver import fetch_one
from runyard.db.tables import runs, threads
from runyard.domain.status import ACTIVE_RUN_STATUSES, RunStatus, ThreadStatus
from runyard.domain.thread import EXPIRED_COLUMNS, ExpiredThread, ThreadRecord, thread_or_none

_ACTIVE = [s.value for s in ACTIVE_RUN_STATUSES]
# Threads migrated from before the column existed have no state_updated_at of their own.
STATE_UPDATED_AT = func.coalesce(threads.c.state_updated_at, threads.c.updated_at)
_SORT_COLUMNS: dict[str, ColumnElement[Any]] = {
    "thread_id": threads.c.thread_id,
    "status": threads.c.status,
    "created_at": threads.c.created_at,
    "updated_at": threads.c.updated_at,
    "state_updated_at": STATE_UPDATED_AT,
}


@dataclass(frozen=True)
class ThreadQuery:
    """The filters of a thread search or count; None means no filter."""

    ids: Sequence[str] | None = None
    metadata: dict[str, Any] | None = None
    values: dict[str, Any] | None = None
    status: str | None = None
    auth_filter: dict[str, Any] | None = None


def _stamp(session: AsyncConnection) -> ColumnElement[Any]:
    return _stamp_in(dialect_name(session))


def _stamp_in(dialect: str) -> ColumnElement[Any]:
    # One value per statement, so created_at equals updated_at on a new row.
    if dialect == "postgresql":
        return func.statement_timestamp()
    return clock(dialect)


# Statements every run executes are built once per dialect (see db/runs.py).


@cache
def _insert_statement(dialect: str) -> Any:
    now = _stamp_in(dialect)
    return (
        insert_ignoring(dialect, threads)
        .values(created_at=now, updated_at=now, state_updated_at=now)
        .returning(*threads.c)
    )


@cache
def _get_statement(dialect: str, lock: bool) -> Select[Any]:
    statement = select(threads).where(threads.c.thread_id == bindparam("p_thread_id"))
    if lock and dialect == "postgresql":
        statement = statement.with_for_update()
    return statement


async def insert_thread(session: AsyncConnection, row: dict[str, Any]) -> ThreadRecord | None:
    """Insert a thread and return it as stored; None (nothing written) when its id exists."""
    statement = _insert_statement(dialect_name(session))
    return thread_or_none((await session.execute(statement, row)).mappings().first())


async def get_thread(
    session: AsyncConnection, thread_id: str, *, lock: bool = False
) -> ThreadRecord | None:
    """A thread; with `lock`, its row held until the transaction ends (PostgreSQL)."""
    statement = _get_statement(dialect_name(session), lock)
    row = (await session.execute(statement, {"p_thread_id": thread_id})).mappings().one_or_none()
    return thread_or_none(row)


async def touch_thread(session: AsyncConnection, thread_id: str) -> bool:
    """Move updated_at to now; False when the thread does not exist.

    Being an UPDATE, it also takes the row's write lock first on every backend, so a
    read-modify-write that follows in the same transaction cannot lose a concurrent change.
    """
    result = await session.execute(
        update(threads).where(threads.c.thread_id == thread_id).values(updated_at=_stamp(session))
    )
    return rowcount(result) > 0


async def set_metadata(session: AsyncConnection, thread_id: str, metadata: dict[str, Any]) -> None:
    """Replace a thread's metadata."""
    await session.execute(
        update(threads)
        .where(threads.c.thread_id == thread_id)
        .values(metadata=metadata, updated_at=_stamp(session))
    )


@cache
def _mark_busy_statement(dialect: str) -> Update:
    return (
        update(threads)
        .where(threads.c.thread_id == bindparam("p_thread_id"))
        .values(
            status=ThreadStatus.BUSY,
            metadata=bindparam("p_metadata", type_=threads.c.metadata.type),
            context=bindparam("p_context", type_=threads.c.context.type),
            updated_at=_stamp_in(dialect),
        )
    )


async def mark_busy(
    session: AsyncConnection, thread_id: str, metadata: dict[str, Any], context: dict[str, Any]
) -> None:
    """A run was queued on the thread: it is busy, its metadata and context are replaced."""
    params = {"p_thread_id": thread_id, "p_metadata": metadata, "p_context": context}
    await session.execute(_mark_busy_statement(dialect_name(session)), params)


@cache
def state_statement(dialect: str, busy_if_pending: bool) -> Update:
    """The UPDATE of `set_state_fields`, built once; bind it with `state_params`."""
    status: Any = bindparam("p_thread_status")
    if busy_if_pending:
        # Busy while another run of the thread is pending or running (runyard/lifecycle/machine.py).
        # The run that ends is named, `p_run_id`: a statement that ends it and writes its
        # thread together still sees it running.
        other_active = exists().where(
            runs.c.thread_id == threads.c.thread_id,
            or_(
                runs.c.status == RunStatus.PENDING,
                and_(runs.c.status == RunStatus.RUNNING, runs.c.run_id != bindparam("p_run_id")),
            ),
        )
        status = case((other_active, ThreadStatus.BUSY.value), else_=status)
    return (
        update(threads)
        .where(threads.c.thread_id == bindparam("p_thread_id"))
        .values(
            status=status,
            values=bindparam("p_values", type_=threads.c["values"].type),
            interrupts=bindparam("p_interrupts", type_=threads.c.interrupts.type),
            error=bindparam("p_thread_error", type_=threads.c.error.type),
            updated_at=_stamp_in(dialect),
            state_updated_at=_stamp_in(dialect),
        )
    )


@dataclass(frozen=True)
class ThreadState:
    """What the thread row caches of its state: status, values, interrupts, error."""

    thread_id: str
    status: str
    values: Any
    interrupts: dict[str, Any]
    error: Any


async def set_state_fields(
    session: AsyncConnection,
    state: ThreadState,
    *,
    busy_if_pending: bool = False,
    ending_run: str | None = None,
) -> None:
    """Store what the thread row caches of its state.

    With `busy_if_pending`, the status is `busy` instead while another run of the thread
    than `ending_run` is pending or running (decided by the same statement, so no run
    queued meanwhile is missed).
    """
    statement = state_statement(dialect_name(session), busy_if_pending)
    params = state_params(state)
    if busy_if_pending:
        params["p_run_id"] = ending_run or ""
    await session.execute(statement, params)


def state_params(state: ThreadState) -> dict[str, Any]:
    """The bound values of `state_statement`."""
    return {
        "p_thread_id": state.thread_id,
        "p_thread_status": state.status,
        "p_values": state.values,
        "p_interrupts": state.interrupts,
        "p_thread_error": state.error,
    }


@cache
def _settle_status_statement(dialect: str) -> Update:
    active = exists().where(runs.c.thread_id == threads.c.thread_id, runs.c.status.in_(_ACTIVE))
    return (
        update(threads)
        .where(threads.c.thread_id == bindparam("p_thread_id"))
        .values(
            status=case((active, ThreadStatus.BUSY.value), else_=bindparam("p_resting")),
            updated_at=_stamp_in(dialect),
        )
    )


async def settle_status(session: AsyncConnection, thread_id: str, resting: str) -> None:
    """The thread's status after a transition: `busy` while any of its runs is pending or
    running, else `resting` (decided in the statement, so a run queued meanwhile counts)."""
    statement = _settle_status_statement(dialect_name(session))
    await session.execute(statement, {"p_thread_id": thread_id, "p_resting": resting})


_DELETE_THREAD = (
    delete(threads)
    .where(threads.c.thread_id == bindparam("p_thread_id"))
    .returning(threads.c.thread_id)
)


async def delete_thread(session: AsyncConnection, thread_id: str) -> bool:
    """Delete a thread (its runs go with it by foreign key); False when it does not exist."""
    return await fetch_one(session, _DELETE_THREAD, {"p_thread_id": thread_id}) is not None


async def has_active_runs(session: AsyncConnection, thread_id: str) -> bool:
    """True while the thread has a pending or running run."""
    statement = (
        select(runs.c.run_id)
        .where(runs.c.thread_id == thread_id, runs.c.status.in_(_ACTIVE))
        .limit(1)
    )
    return (await session.execute(statement)).first() is not None


async def search_threads(
    session: AsyncConnection,
    query: ThreadQuery,
    *,
    sort_by: str,
    descending: bool,
    limit: int,
    offset: int,
) -> list[ThreadRecord]:
    """One page of threads matching the query, in the given order (ties broken by id)."""
    column = _SORT_COLUMNS[sort_by]
    order = (
        [column.desc(), threads.c.thread_id.desc()]
        if descending
        else [
            column.asc(),
            threads.c.thread_id.asc(),
        ]
    )
    statement = _filtered(session, select(threads), query).order_by(*order)
    rows = (await session.execute(statement.limit(limit).offset(offset))).mappings().all()
    return [ThreadRecord.from_row(row) for row in rows]


async def count_threads(session: AsyncConnection, query: ThreadQuery) -> int:
    """How many threads match the query."""
    statement = _filtered(session, select(func.count()).select_from(threads), query)
    return int((await session.execute(statement)).scalar_one())


def _filtered(session: AsyncConnection, statement: Select[Any], query: ThreadQuery) -> Select[Any]:
    conditions: list[Any] = []
    if query.ids is not None:
        conditions.append(threads.c.thread_id.in_(list(query.ids)))
    if query.status is not None:
        conditions.append(threads.c.status == query.status)
    if query.metadata:
        conditions += json_contains(session, threads.c.metadata, query.metadata)
    if query.values:
        conditions += json_contains(session, threads.c["values"], query.values)
    if query.auth_filter:
        conditions += json_filter(session, threads.c.metadata, query.auth_filter)
    return statement.where(*conditions) if conditions else statement


async def set_ttl(
    session: AsyncConnection,
    thread_id: str,
    strategy: str | None,
    minutes: float | None,
    expires_at: Any,
) -> bool:
    """Set (or with None, clear) a thread's time-to-live; False when it does not exist."""
    result = await session.execute(
        update(threads)
        .where(threads.c.thread_id == thread_id)
        .values(ttl_strategy=strategy, ttl_minutes=minutes, expires_at=expires_at)
    )
    return rowcount(result) > 0


async def claim_expired_threads(
    session: AsyncConnection, limit: int, hold_seconds: float
) -> list[ExpiredThread]:
    """Claim up to `limit` expired threads with no pending or running run, oldest expiry first.

    A claim moves their expiry `hold_seconds` ahead, so a concurrent sweeper (another
    instance) skips them, and one that dies before finishing leaves them to a later sweep.
    On PostgreSQL rows another sweeper holds are skipped, not waited for.
    """
    dialect = dialect_name(session)
    now = clock(dialect)
    busy = exists().where(runs.c.thread_id == threads.c.thread_id, runs.c.status.in_(_ACTIVE))
    due = (
        select(threads.c.thread_id)
        .where(threads.c.expires_at.is_not(None), threads.c.expires_at <= now, ~busy)
        .order_by(threads.c.expires_at)
        .limit(limit)
    )
    if dialect == "postgresql":
        due = due.with_for_update(skip_locked=True)
    statement = (
        update(threads)
        .where(threads.c.thread_id.in_(due.scalar_subquery()))
        .values(expires_at=clock_plus(dialect, "p_hold"))
        .returning(*(threads.c[name] for name in EXPIRED_COLUMNS))
    )
    params = {"p_hold": seconds_param(dialect, hold_seconds)}
    rows = (await session.execute(statement, params)).mappings().all()
    return [ExpiredThread.from_row(row) for row in rows]


async def set_priority_settings(
    session: AsyncConnection, thread_id: str, priority: int, fairness_group: str
) -> bool:
    """Store a thread's priority settings unless it has some: the first stored wins."""
    result = await session.execute(
        update(threads)
        .where(threads.c.thread_id == thread_id, threads.c.priority.is_(None))
        .values(priority=priority, fairness_group=fairness_group)
    )
    return rowcount(result) > 0
