"""The records of at-most-once tool calls for the attempts a worker executes: the book of
each attempt (runyard/domain/tool_calls.py), its statements in runyard/db/tool_calls.py.

A result is stored as the checkpointer stores a value, with its serializer: encrypted under
LANGGRAPH_AES_KEY or by the blob handlers of `encryption.path` as the checkpoints are, so
what a tool returned is never kept in plain text where its message in the checkpoint is
not. Each statement is tried again while the database is unreachable, for up to a lease,
as the checkpoint writes are; a write refused because the attempt lost its run raises
StaleAttemptError, and the attempt stands down.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, NoReturn, TypeVar

from langgraph.checkpoint.serde.base import SerializerProtocol

from runyard.db import tool_calls as sql
from runyard.db.engine import Sessions
from runyard.db.faults import retry_while_store_unavailable
from runyard.domain.errors import StaleAttemptError
from runyard.domain.tool_calls import (
    Finished,
    Found,
    Started,
    ToolCallKey,
    ToolCallStatus,
    Unknown,
)
from runyard.loop_calls import from_thread

log = logging.getLogger("runyard.tools")
T = TypeVar("T")


class ToolCallRecords:
    """Makes each attempt's book; built from the autocommit sessions, the checkpointer's
    serializer, the bound on a kept result (RUNYARD_MAX_TOOL_RESULT_BYTES) and how long a
    statement is tried again while the database is away (a lease)."""

    def __init__(
        self,
        autocommit: Sessions,
        serde: SerializerProtocol,
        max_result_bytes: int,
        retry_seconds: float,
    ) -> None:
        self.autocommit = autocommit
        self.serde = serde
        self.max_result_bytes = max_result_bytes
        self.retry_seconds = retry_seconds

    def for_attempt(self, run_id: str, attempt: int, thread_id: str) -> AttemptToolCalls:
        """The book of one attempt of a run (on the running event loop)."""
        return AttemptToolCalls(self, run_id, attempt, thread_id)


class AttemptToolCalls:
    """One attempt's tool call records (`ToolCallBook`), each write fenced by the attempt."""

    def __init__(self, records: ToolCallRecords, run_id: str, attempt: int, thread_id: str) -> None:
        self._records = records
        self._run_id = run_id
        self._attempt = attempt
        self._thread_id = thread_id
        self._loop = asyncio.get_running_loop()
        # Calls this attempt began: a second call with the same key in the same attempt (a
        # model repeating a tool call id) is not made again either.
        self._begun: set[str] = set()

    @property
    def thread_id(self) -> str:
        """The thread of the attempt's run."""
        return self._thread_id

    async def begin(self, key: ToolCallKey) -> Found:
        """Record the intent to make the call, unless an earlier attempt recorded one."""
        call_key = key.record_key
        if call_key in self._begun:
            return Unknown(self._run_id, self._attempt)
        self._begun.add(call_key)

        if await self._statement(
            key, lambda session: sql.record_intent(session, *self._fence, key)
        ):
            return Started()
        row = await self._statement(key, lambda session: sql.read_call(session, *self._fence, key))
        if row is None or not row.held:
            self._refuse(key)
        if row.status == ToolCallStatus.DONE:
            return self._finished(row)
        if (row.run_id, row.attempt) == self._fence:
            # This attempt's own intent: its first statement was written, its answer lost.
            return Started()
        return Unknown(row.run_id, row.attempt)

    async def finish(self, key: ToolCallKey, result: Any) -> None:
        """Record the outcome of a call this attempt made."""
        await self._settle(key, self._fence, self._outcome(key, result))

    async def take_over(self, key: ToolCallKey, unknown: Unknown) -> None:
        """Make an earlier attempt's unfinished call this attempt's, to make it again."""
        await self._settle(
            key, (unknown.run_id, unknown.attempt), sql.Outcome(ToolCallStatus.INTENT)
        )

    async def answer(self, key: ToolCallKey, unknown: Unknown, result: Any) -> None:
        """Record `result` as the outcome of an earlier attempt's unfinished call."""
        await self._settle(key, (unknown.run_id, unknown.attempt), self._outcome(key, result))

    async def withdraw(self, key: ToolCallKey) -> None:
        """Remove this attempt's intent: the call stopped at an interrupt, to run again."""
        self._begun.discard(key.record_key)
        await self._statement(key, lambda session: sql.withdraw_intent(session, *self._fence, key))

    def blocking(self, call: Coroutine[Any, Any, T]) -> T:
        """`call`'s result, from a thread other than the event loop's (a sync tool)."""
        return from_thread(
            call,
            self._loop,
            "a synchronous at_most_once tool was called on the event loop; LangGraph runs "
            "synchronous tools on threads (ToolNode, `await tool.ainvoke(call)`)",
        )

    # --- plumbing ---------------------------------------------------------------------------

    @property
    def _fence(self) -> tuple[str, int]:
        return self._run_id, self._attempt

    async def _settle(self, key: ToolCallKey, owner: tuple[str, int], outcome: sql.Outcome) -> None:
        async def settle(session: Any) -> bool:
            return await sql.settle_call(session, *self._fence, key, owner, outcome)

        if await self._statement(key, settle):
            return
        # Refused: the attempt lost its run, unless the record is this attempt's already (a
        # statement sent again after its answer was lost, which found it written).
        row = await self._statement(key, lambda session: sql.read_call(session, *self._fence, key))
        if row is None or not row.held or (row.run_id, row.attempt) != self._fence:
            self._refuse(key)

    async def _statement(self, key: ToolCallKey, call: Callable[[Any], Awaitable[T]]) -> T:
        """One statement on an autocommit session, again while the database is away."""

        async def once() -> T:
            async with self._records.autocommit() as session:
                return await call(session)

        return await retry_while_store_unavailable(
            once,
            self._records.retry_seconds,
            "tool_call_store_unavailable_retrying",
            run_id=self._run_id,
            tool=key.tool,
        )

    def _outcome(self, key: ToolCallKey, result: Any) -> sql.Outcome:
        """The result as stored, or only its size when it is over the bound."""
        records = self._records
        # A tuple (content and artifact) would come back a list: its kind is kept beside it.
        kind, blob = records.serde.dumps_typed(
            {"value": result, "tuple": isinstance(result, tuple)}
        )
        if len(blob) <= records.max_result_bytes:
            return sql.Outcome(ToolCallStatus.DONE, kind, blob, len(blob))
        log.warning(
            "tool_result_not_kept tool=%s tool_call_id=%s bytes=%s limit=%s",
            key.tool,
            key.tool_call_id,
            len(blob),
            records.max_result_bytes,
        )
        return sql.Outcome(ToolCallStatus.DONE, result_bytes=len(blob))

    def _finished(self, row: sql.CallRow) -> Finished:
        size = row.result_bytes or 0
        if row.result is None or row.result_type is None:
            return Finished(None, kept=False, size=size, limit=self._records.max_result_bytes)
        stored = self._records.serde.loads_typed((row.result_type, row.result))
        value = stored["value"]
        return Finished(tuple(value) if stored["tuple"] else value, size=size)

    def _refuse(self, key: ToolCallKey) -> NoReturn:
        raise StaleAttemptError(
            f"attempt {self._attempt} of run {self._run_id} is no longer current; the record "
            f"of tool call {key.tool_call_id} ({key.tool}) was refused"
        )
