"""At-most-once tool calls: what identifies a call, what its record says, and the book an
attempt keeps those records in.

A call is identified within its thread by the step's checkpoint namespace (which holds the
step's task id, derived from the checkpoint the step started from) and the model's tool
call id: both are the same when the step runs again, in a resumed attempt or in the run
that answers an interrupt of that step, and differ for any other step.

The worker makes the book of the attempt it executes the current one (`use_book`); the
decorator (runyard/tools/) finds it there, in the context the graph's tasks inherit, so a
graph reaches its records without importing the server. Outside a run there is no book.
"""

from __future__ import annotations

import uuid
from collections.abc import Coroutine
from contextvars import ContextVar
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol, TypeVar

T = TypeVar("T")

# Names every call key: a fixed namespace, so a key is the same on every instance.
_CALL_NAMESPACE = uuid.UUID("5f0c4c0e-3b7e-4a52-9a47-0c2b1f9d6e31")


class ToolCallStatus(StrEnum):
    """What a call's record says: started (its outcome not recorded), or done."""

    INTENT = "intent"
    DONE = "done"


@dataclass(frozen=True)
class ToolCallKey:
    """One tool call of a thread's step, and the tool it calls."""

    thread_id: str
    checkpoint_ns: str
    tool_call_id: str
    tool: str

    @property
    def record_key(self) -> str:
        """The call's key within its thread; also the idempotency key given to the tool."""
        name = f"{self.thread_id}\x00{self.checkpoint_ns}\x00{self.tool_call_id}"
        return str(uuid.uuid5(_CALL_NAMESPACE, name))


@dataclass(frozen=True)
class Started:
    """The call is this attempt's to make: its intent is recorded."""


@dataclass(frozen=True)
class Finished:
    """An earlier attempt made the call and recorded its outcome.

    `kept` is False when the result was too large to keep (`size` bytes, over `limit`).
    """

    result: Any
    kept: bool = True
    size: int = 0
    limit: int = 0


@dataclass(frozen=True)
class Unknown:
    """An earlier attempt (`run_id`, `attempt`) started the call and recorded no outcome."""

    run_id: str
    attempt: int


Found = Started | Finished | Unknown


class ToolCallBook(Protocol):
    """The records of one attempt's tool calls; each write is made only while the attempt
    holds its run (StaleAttemptError otherwise)."""

    @property
    def thread_id(self) -> str:
        """The thread of the attempt's run."""
        ...

    async def begin(self, key: ToolCallKey) -> Found:
        """Record the intent to make the call, unless an earlier attempt recorded one."""
        ...

    async def finish(self, key: ToolCallKey, result: Any) -> None:
        """Record the outcome of a call this attempt made."""
        ...

    async def take_over(self, key: ToolCallKey, unknown: Unknown) -> None:
        """Make an earlier attempt's unfinished call this attempt's, to make it again."""
        ...

    async def answer(self, key: ToolCallKey, unknown: Unknown, result: Any) -> None:
        """Record `result` as the outcome of an earlier attempt's unfinished call."""
        ...

    async def withdraw(self, key: ToolCallKey) -> None:
        """Remove this attempt's intent: the call stopped at an interrupt, to run again."""
        ...

    def blocking(self, call: Coroutine[Any, Any, T]) -> T:
        """`call`'s result, from a thread other than the event loop's (a sync tool)."""
        ...


_current: ContextVar[ToolCallBook | None] = ContextVar("runyard_tool_call_book", default=None)


def current_book() -> ToolCallBook | None:
    """The book of the attempt in hand; None outside a Runyard run."""
    return _current.get()


def use_book(book: ToolCallBook | None) -> None:
    """Make `book` the current one for this task and the tasks and threads it starts."""
    _current.set(book)
