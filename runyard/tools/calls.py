"""One call of an at-most-once tool: its key, what its record says, and what it does then.

Inside a Runyard run the attempt's book (runyard/domain/tool_calls.py) is the current one:
the call's intent is recorded before the tool runs and its result after. A call an earlier
attempt finished returns its recorded result; one it started and never finished is not
made again (its outcome is unknown): the model is told, or a person asked (`interrupt`).
Outside a run the tool is called as it is.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from langchain_core.messages import ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.errors import GraphInterrupt
from langgraph.types import interrupt

from runyard.domain.errors import InvalidInputError, RunyardError
from runyard.domain.tool_calls import (
    Finished,
    Found,
    Started,
    ToolCallBook,
    ToolCallKey,
    Unknown,
    current_book,
)

log = logging.getLogger("runyard.tools")
T = TypeVar("T")

OnUnknown = Literal["error", "interrupt"]
ON_UNKNOWN: tuple[OnUnknown, ...] = ("error", "interrupt")
# A ToolMessage's mark for a call that failed (LangChain's word, not a run's status).
FAILED_CALL: Literal["error"] = "error"
# The answers to an unknown outcome's interrupt (`Command(resume=...)`).
ANSWERS = ({"action": "call"}, {"action": "return", "result": "..."}, {"action": "error"})

_idempotency_key: ContextVar[str | None] = ContextVar("runyard_idempotency_key", default=None)


def idempotency_key() -> str:
    """The key of the tool call in hand, for a provider's `Idempotency-Key`.

    The same for every attempt at the call (a resumed run, a call made again after an
    interrupt); a new one for each call outside a Runyard run.
    """
    key = _idempotency_key.get()
    if key is None:
        raise RunyardError(
            "idempotency_key() was called outside a tool marked at_most_once; call it from "
            "the tool's own code while it runs"
        )
    return key


class UnkeyedToolCallError(RunyardError):
    """An at-most-once tool was called in a run without a tool call to key it by."""


@dataclass
class CallPolicy:
    """How a decorated tool's calls go: its name, what an unknown outcome does, and
    whether a result given by a person becomes a message (`message_answers`, a BaseTool)."""

    tool: str
    on_unknown: OnUnknown
    message_answers: bool = False
    told_unfenced: bool = False


@dataclass(frozen=True)
class Call:
    """One call: its policy, and in a run the attempt's book and the call's key.

    `within`: the call being made already (a BaseTool's `ainvoke` that runs its `invoke`
    on a thread): it goes straight to the tool.
    """

    policy: CallPolicy
    book: ToolCallBook | None = None
    key: ToolCallKey | None = None
    within: bool = False


@dataclass(frozen=True)
class _Make:
    """Make the call (after taking over an earlier attempt's, when `unknown` is set)."""

    unknown: Unknown | None = None


@dataclass(frozen=True)
class _Return:
    """Return `value` without making the call."""

    value: Any


@dataclass(frozen=True)
class _Answer:
    """Record `result` as the outcome of the earlier attempt's call, and return it."""

    unknown: Unknown
    result: Any


def plan_call(policy: CallPolicy, tool_call_id: str | None, config: RunnableConfig) -> Call:
    """The call made with this tool call id and the step's config."""
    book = current_book()
    if book is None:
        if not policy.told_unfenced:
            policy.told_unfenced = True
            log.info("tool_call_unfenced tool=%s reason=outside_runyard_run", policy.tool)
        return Call(policy)
    namespace = (config.get("configurable") or {}).get("checkpoint_ns")
    if not tool_call_id or not namespace:
        raise UnkeyedToolCallError(
            f"{policy.tool} is marked at_most_once and was called without "
            f"{'a tool call id' if not tool_call_id else 'a graph step'}: call it with the "
            "model's ToolCall from a node (ToolNode does), whose id keys the call"
        )
    key = ToolCallKey(book.thread_id, namespace, tool_call_id, policy.tool)
    if _idempotency_key.get() == key.record_key:
        return Call(policy, within=True)
    return Call(policy, book, key)


async def call_async(call: Call, invoke: Callable[[], Awaitable[T]]) -> Any:
    """Make (or not) one call of an async tool."""
    book, key = call.book, call.key
    if call.within:
        return await invoke()
    if book is None or key is None:
        with _keyed(str(uuid.uuid4())):
            return await invoke()
    action = _resolve(call, await book.begin(key))
    if isinstance(action, _Return):
        return action.value
    if isinstance(action, _Answer):
        result = _as_output(call, action.result)
        await book.answer(key, action.unknown, result)
        return result
    if action.unknown is not None:
        await book.take_over(key, action.unknown)
    with _keyed(key.record_key):
        try:
            result = await invoke()
        except GraphInterrupt:
            # The tool's own interrupt: nothing was done yet, and it runs again when answered.
            await book.withdraw(key)
            raise
    await book.finish(key, result)
    return result


def call_sync(call: Call, invoke: Callable[[], T]) -> Any:
    """Make (or not) one call of a synchronous tool (on a thread, never the event loop)."""
    book, key = call.book, call.key
    if call.within:
        return invoke()
    if book is None or key is None:
        with _keyed(str(uuid.uuid4())):
            return invoke()
    action = _resolve(call, book.blocking(book.begin(key)))
    if isinstance(action, _Return):
        return action.value
    if isinstance(action, _Answer):
        result = _as_output(call, action.result)
        book.blocking(book.answer(key, action.unknown, result))
        return result
    if action.unknown is not None:
        book.blocking(book.take_over(key, action.unknown))
    with _keyed(key.record_key):
        try:
            result = invoke()
        except GraphInterrupt:
            book.blocking(book.withdraw(key))
            raise
    book.blocking(book.finish(key, result))
    return result


@contextmanager
def _keyed(key: str) -> Iterator[None]:
    token = _idempotency_key.set(key)
    try:
        yield
    finally:
        _idempotency_key.reset(token)


def _resolve(call: Call, found: Found) -> _Make | _Return | _Answer:
    """What the call does, given what its record says."""
    key = call.key
    assert key is not None
    if isinstance(found, Started):
        return _Make()
    if isinstance(found, Finished):
        log.info("tool_call_replayed tool=%s tool_call_id=%s", key.tool, key.tool_call_id)
        if found.kept:
            return _Return(found.result)
        return _Return(_error(call, _not_kept(key, found)))
    log.warning(
        "tool_call_outcome_unknown tool=%s tool_call_id=%s started_by_run=%s "
        "started_by_attempt=%s on_unknown=%s",
        key.tool,
        key.tool_call_id,
        found.run_id,
        found.attempt,
        call.policy.on_unknown,
    )
    if call.policy.on_unknown == "interrupt":
        return _decided(call, found, interrupt(_question(key)))
    return _Return(_error(call, _unknown(key)))


def _decided(call: Call, unknown: Unknown, answer: Any) -> _Make | _Return | _Answer:
    """What a person's answer to the interrupt asks for."""
    key = call.key
    assert key is not None
    action = answer.get("action") if isinstance(answer, dict) else None
    if action == "call":
        return _Make(unknown)
    if action == "return" and "result" in answer:
        return _Answer(unknown, answer["result"])
    if action == "error":
        return _Return(_error(call, _unknown(key)))
    raise InvalidInputError(
        f"the answer to the interrupt about {key.tool} (tool call {key.tool_call_id}) must "
        f"be one of {json.dumps(ANSWERS)}; got {str(answer)[:200]!r}"
    )


def _question(key: ToolCallKey) -> dict[str, Any]:
    """The interrupt's value: which call, its key, and how to answer."""
    return {
        "type": "tool_outcome_unknown",
        "tool": key.tool,
        "tool_call_id": key.tool_call_id,
        "idempotency_key": key.record_key,
        "message": _unknown(key),
        "answers": list(ANSWERS),
    }


def _unknown(key: ToolCallKey) -> str:
    return (
        f"The outcome of {key.tool} (tool call {key.tool_call_id}) is unknown: an earlier "
        "attempt at this step started the call and stopped before recording how it ended "
        "(the server executing the run stopped). It may or may not have taken effect. "
        f"It was not called again, because {key.tool} is marked at most once: check its "
        "effect before calling it again."
    )


def _not_kept(key: ToolCallKey, found: Finished) -> str:
    return (
        f"{key.tool} (tool call {key.tool_call_id}) was already called by an earlier attempt "
        f"at this step, but its result ({found.size} bytes) was larger than "
        f"RUNYARD_MAX_TOOL_RESULT_BYTES ({found.limit}) and was not kept. It was not called "
        f"again, because {key.tool} is marked at most once."
    )


def _error(call: Call, text: str) -> ToolMessage:
    """The model's answer for a call not made: an error message, as ToolNode makes one."""
    key = call.key
    assert key is not None
    name = key.tool if call.policy.message_answers else None
    return ToolMessage(content=text, tool_call_id=key.tool_call_id, name=name, status=FAILED_CALL)


def _as_output(call: Call, result: Any) -> Any:
    """A person's answer as the tool's output: a BaseTool's is a message."""
    key = call.key
    if not call.policy.message_answers or isinstance(result, ToolMessage) or key is None:
        return result
    content = result if isinstance(result, str) else json.dumps(result, ensure_ascii=False)
    return ToolMessage(content=content, tool_call_id=key.tool_call_id, name=key.tool)
