"""How `at_most_once` wraps what it decorates: a tool's function (under LangChain's `@tool`),
or a `BaseTool` instance. Each call goes through runyard/tools/calls.py with the id of the
ToolCall it was invoked with and the step's config."""

from __future__ import annotations

import functools
import inspect
import types
import typing
from collections.abc import Callable
from typing import Annotated, Any

from langchain_core.runnables import RunnableConfig, ensure_config
from langchain_core.tools import BaseTool, InjectedToolCallId

from runyard.tools.calls import CallPolicy, OnUnknown, call_async, call_sync, plan_call

# The keyword argument LangChain fills with the call's id (InjectedToolCallId), added to a
# function that does not take the id itself; hidden from the model's view of the tool.
CALL_ID_ARGUMENT = "runyard_tool_call_id"


def fenced_function(fn: Callable[..., Any], on_unknown: OnUnknown) -> Callable[..., Any]:
    """`fn` (sync or async) with each call fenced; its signature takes the call's id."""
    policy = CallPolicy(fn.__name__, on_unknown)
    own = _call_id_parameter(fn)

    def call_id(kwargs: dict[str, Any]) -> str | None:
        return kwargs.get(own) if own else kwargs.pop(CALL_ID_ARGUMENT, None)

    wrapper: Callable[..., Any]
    if inspect.iscoroutinefunction(fn):

        @functools.wraps(fn)
        async def fenced_async(*args: Any, **kwargs: Any) -> Any:
            call = plan_call(policy, call_id(kwargs), ensure_config())
            return await call_async(call, lambda: fn(*args, **kwargs))

        wrapper = fenced_async
    else:

        @functools.wraps(fn)
        def fenced_sync(*args: Any, **kwargs: Any) -> Any:
            call = plan_call(policy, call_id(kwargs), ensure_config())
            return call_sync(call, lambda: fn(*args, **kwargs))

        wrapper = fenced_sync
    if own is None:
        _take_call_id(wrapper, fn)
    return wrapper


def fenced_tool(tool: BaseTool, on_unknown: OnUnknown) -> BaseTool:
    """A copy of `tool` whose calls are fenced: of its own class, but for `invoke` and
    `ainvoke`, so its schema, injected arguments and error handling are unchanged."""
    policy = CallPolicy(tool.name, on_unknown, message_answers=True)
    base = type(tool)

    async def ainvoke(
        self: BaseTool, input: Any, config: RunnableConfig | None = None, **kw: Any
    ) -> Any:
        call = plan_call(policy, _tool_call_id(input), ensure_config(config))
        return await call_async(call, lambda: base.ainvoke(self, input, config, **kw))

    def invoke(self: BaseTool, input: Any, config: RunnableConfig | None = None, **kw: Any) -> Any:
        call = plan_call(policy, _tool_call_id(input), ensure_config(config))
        return call_sync(call, lambda: base.invoke(self, input, config, **kw))

    def body(namespace: dict[str, Any]) -> None:
        namespace.update(
            __module__=base.__module__, __doc__=base.__doc__, ainvoke=ainvoke, invoke=invoke
        )

    fenced_class = types.new_class(base.__name__, (base,), exec_body=body)
    fenced = tool.model_copy()
    # The copy becomes an instance of the subclass: a BaseTool's fields and private state
    # stay as they are, which building a new instance would validate (or lose) again.
    object.__setattr__(fenced, "__class__", fenced_class)
    return fenced


def _tool_call_id(tool_input: Any) -> str | None:
    """The id of the ToolCall a tool was invoked with (None for plain arguments)."""
    if isinstance(tool_input, dict) and tool_input.get("type") == "tool_call":
        call_id = tool_input.get("id")
        return str(call_id) if call_id else None
    return None


def _call_id_parameter(fn: Callable[..., Any]) -> str | None:
    """The parameter of `fn` that takes its call's id already (InjectedToolCallId), if any."""
    try:
        hints = typing.get_type_hints(fn, include_extras=True)
    except Exception:
        return None
    for name, hint in hints.items():
        if name != "return" and typing.get_origin(hint) is Annotated:
            for marker in typing.get_args(hint)[1:]:
                if isinstance(marker, InjectedToolCallId) or marker is InjectedToolCallId:
                    return name
    return None


def _take_call_id(wrapper: Callable[..., Any], fn: Callable[..., Any]) -> None:
    """Give `wrapper` the signature of `fn` plus the keyword argument of the call's id."""
    signature = inspect.signature(fn)
    hidden = inspect.Parameter(
        CALL_ID_ARGUMENT,
        inspect.Parameter.KEYWORD_ONLY,
        default=None,
        annotation=Annotated[str | None, InjectedToolCallId],
    )
    params = list(signature.parameters.values())
    rest = [p for p in params if p.kind is inspect.Parameter.VAR_KEYWORD]
    before = [p for p in params if p.kind is not inspect.Parameter.VAR_KEYWORD]
    wrapper.__signature__ = signature.replace(parameters=[*before, hidden, *rest])  # type: ignore[attr-defined]
    wrapper.__annotations__ = {
        **getattr(fn, "__annotations__", {}),
        CALL_ID_ARGUMENT: hidden.annotation,
    }
