"""At-most-once tools: a tool call that a resumed run never makes twice (docs/tools.md).

    from langchain_core.tools import tool
    from runyard.tools import at_most_once, idempotency_key

    @tool
    @at_most_once
    async def send_email(to: str) -> str:
        \"\"\"Send the e-mail.\"\"\"
        await mailer.send(to, headers={"Idempotency-Key": idempotency_key()})
        return "sent"

A run resumed after a crash runs its unfinished step again, and with it every tool call of
that step. A call of a decorated tool that an earlier attempt finished returns the result
recorded then; one it started and never finished is not made again: its outcome is
unknown, and the model gets an error message saying so (or, with
`at_most_once(on_unknown="interrupt")`, the run stops at an interrupt for a person to
answer). Outside a Runyard run (`graph.invoke` in a notebook or a test) the tool is
called as it is.
"""

from __future__ import annotations

from typing import Any, TypeVar, overload

from langchain_core.tools import BaseTool

from runyard.domain.errors import ConfigError
from runyard.tools.calls import ON_UNKNOWN, OnUnknown, UnkeyedToolCallError, idempotency_key
from runyard.tools.wrappers import fenced_function, fenced_tool

T = TypeVar("T")

__all__ = ["OnUnknown", "UnkeyedToolCallError", "at_most_once", "idempotency_key"]


@overload
def at_most_once(target: T, *, on_unknown: OnUnknown = "error") -> T: ...


@overload
def at_most_once(*, on_unknown: OnUnknown = "error") -> Any: ...


def at_most_once(target: Any = None, *, on_unknown: OnUnknown = "error") -> Any:
    """Mark a tool so that a resumed run never calls it twice for the same tool call.

    Decorate the tool's function under LangChain's `@tool` (sync or async), or wrap a
    `BaseTool`: `at_most_once(tool)`. Calls are keyed by their ToolCall's id (ToolNode
    passes it). `on_unknown`: what a call an earlier attempt started and never finished
    does instead of running: `"error"` answers the model with an error message naming the
    tool and the call, `"interrupt"` stops the run for a person, who resumes it with
    `{"action": "call"}`, `{"action": "return", "result": ...}` or `{"action": "error"}`.
    """
    if on_unknown not in ON_UNKNOWN:
        raise ConfigError(
            f"at_most_once(on_unknown={on_unknown!r}): use one of {', '.join(ON_UNKNOWN)}"
        )
    if target is None:
        return lambda decorated: at_most_once(decorated, on_unknown=on_unknown)
    if isinstance(target, BaseTool):
        return fenced_tool(target, on_unknown)
    if callable(target):
        return fenced_function(target, on_unknown)
    raise ConfigError(
        f"at_most_once decorates a tool's function or a BaseTool, not {type(target).__name__}"
    )
