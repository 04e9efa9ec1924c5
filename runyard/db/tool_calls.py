"""SQL of at-most-once tool calls (runyard/tools/): a call's intent, its outcome, and the
reads that tell a resumed attempt what an earlier one did.

Every write is conditional on the writing attempt still holding its run, in the write's own
statement: `EXISTS` over the run row with that attempt, read `FOR SHARE` on PostgreSQL (a
claim or an end committing meanwhile is waited for, and the newer row checked). An attempt
that lost its run records nothing, however recently it held it. A call's intent is one row
per call (its primary key), so of two attempts at most one records it.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

from sqlalchemy import (
    Exists,
    Integer,
    LargeBinary,
    Select,
    String,
    Text,
    bindparam,
    delete,
    literal,
    select,
    update,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncConnection

from runyard.db.dialect import clock, dialect_name
from runyard.db.driver import fetch_one
from runyard.db.tables import runs, tool_calls
from runyard.domain.status import RunStatus
from runyard.domain.tool_calls import ToolCallKey, ToolCallStatus


@dataclass(frozen=True)
class CallRow:
    """A call's record as stored, and whether the reading attempt still holds its run."""

    run_id: str
    attempt: int
    status: ToolCallStatus
    result_type: str | None
    result: bytes | None
    result_bytes: int | None
    held: bool


def _held(dialect: str) -> Exists:
    """True while attempt `p_attempt` holds run `p_run_id` (the fence)."""
    row = select(literal(1)).where(
        runs.c.run_id == bindparam("p_run_id", type_=String()),
        runs.c.attempt == bindparam("p_attempt", type_=Integer()),
        runs.c.status == RunStatus.RUNNING,
    )
    if dialect == "postgresql":
        row = row.with_for_update(read=True)
    return row.exists()


def _this_call() -> list[Any]:
    return [
        tool_calls.c.thread_id == bindparam("p_thread_id", type_=String()),
        tool_calls.c.call_key == bindparam("p_call_key", type_=String()),
    ]


@cache
def _intent_statement(dialect: str) -> Any:
    names = ("thread_id", "call_key", "checkpoint_ns", "tool_call_id", "tool", "run_id")
    types = (String(), String(), Text(), Text(), Text(), String())
    values = select(
        *(bindparam(f"p_{name}", type_=kind) for name, kind in zip(names, types, strict=True)),
        bindparam("p_attempt", type_=Integer()),
        literal(ToolCallStatus.INTENT.value, type_=String()),
    ).where(_held(dialect))
    insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
    return (
        insert(tool_calls)
        .from_select([*names, "attempt", "status"], values)
        .on_conflict_do_nothing(index_elements=["thread_id", "call_key"])
        .returning(tool_calls.c.call_key)
    )


async def record_intent(
    session: AsyncConnection, run_id: str, attempt: int, key: ToolCallKey
) -> bool:
    """Record that the attempt makes the call; False when it did not (the call has a record
    already, or the attempt no longer holds its run: `read_call` tells which)."""
    params = _params(run_id, attempt, key) | {
        "p_checkpoint_ns": key.checkpoint_ns,
        "p_tool_call_id": key.tool_call_id,
        "p_tool": key.tool,
    }
    return await fetch_one(session, _intent_statement(dialect_name(session)), params) is not None


@cache
def _read_statement(dialect: str) -> Select[Any]:
    c = tool_calls.c
    return select(
        c.run_id,
        c.attempt,
        c.status,
        c.result_type,
        c.result,
        c.result_bytes,
        _held(dialect).label("held"),
    ).where(*_this_call())


async def read_call(
    session: AsyncConnection, run_id: str, attempt: int, key: ToolCallKey
) -> CallRow | None:
    """The call's record (None when it has none), and whether the attempt holds its run."""
    params = _params(run_id, attempt, key)
    row = await fetch_one(session, _read_statement(dialect_name(session)), params)
    if row is None:
        return None
    return CallRow(
        row["run_id"],
        row["attempt"],
        ToolCallStatus(row["status"]),
        row["result_type"],
        None if row["result"] is None else bytes(row["result"]),
        row["result_bytes"],
        bool(row["held"]),
    )


@cache
def _settle_statement(dialect: str) -> Any:
    c = tool_calls.c
    return (
        update(tool_calls)
        .where(
            *_this_call(),
            c.run_id == bindparam("p_owner_run_id", type_=String()),
            c.attempt == bindparam("p_owner_attempt", type_=Integer()),
            _held(dialect),
        )
        .values(
            run_id=bindparam("p_run_id", type_=String()),
            attempt=bindparam("p_attempt", type_=Integer()),
            status=bindparam("p_status", type_=String()),
            result_type=bindparam("p_result_type", type_=String()),
            result=bindparam("p_result", type_=LargeBinary()),
            result_bytes=bindparam("p_result_bytes", type_=Integer()),
            updated_at=clock(dialect),
        )
        .returning(c.call_key)
    )


@dataclass(frozen=True)
class Outcome:
    """What a call's record is set to: its status, and the result as stored."""

    status: ToolCallStatus
    result_type: str | None = None
    result: bytes | None = None
    result_bytes: int | None = None


async def settle_call(
    session: AsyncConnection,
    run_id: str,
    attempt: int,
    key: ToolCallKey,
    owner: tuple[str, int],
    outcome: Outcome,
) -> bool:
    """Write the call's record as the attempt's, with `outcome`, if the record still belongs
    to `owner` (run id, attempt) and the attempt still holds its run; False otherwise."""
    params = _params(run_id, attempt, key) | {
        "p_owner_run_id": owner[0],
        "p_owner_attempt": owner[1],
        "p_status": outcome.status.value,
        "p_result_type": outcome.result_type,
        "p_result": outcome.result,
        "p_result_bytes": outcome.result_bytes,
    }
    return await fetch_one(session, _settle_statement(dialect_name(session)), params) is not None


@cache
def _withdraw_statement(dialect: str) -> Any:
    c = tool_calls.c
    return (
        delete(tool_calls)
        .where(
            *_this_call(),
            c.run_id == bindparam("p_run_id", type_=String()),
            c.attempt == bindparam("p_attempt", type_=Integer()),
            c.status == ToolCallStatus.INTENT.value,
            _held(dialect),
        )
        .returning(c.call_key)
    )


async def withdraw_intent(
    session: AsyncConnection, run_id: str, attempt: int, key: ToolCallKey
) -> bool:
    """Remove the attempt's own intent (the call did not end), if it still holds its run."""
    params = _params(run_id, attempt, key)
    return await fetch_one(session, _withdraw_statement(dialect_name(session)), params) is not None


def _params(run_id: str, attempt: int, key: ToolCallKey) -> dict[str, Any]:
    """The fence's parameters and the call's."""
    return {
        "p_run_id": run_id,
        "p_attempt": attempt,
        "p_thread_id": key.thread_id,
        "p_call_key": key.record_key,
    }
