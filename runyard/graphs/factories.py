"""Graph factories as LangGraph calls them: by the arguments they declare, set up per use."""

from __future__ import annotations

import inspect
import typing
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Literal, get_args, get_origin

from langgraph.runtime import Runtime
from langgraph.store.base import BaseStore
from langgraph_sdk.runtime import ServerRuntime

from runyard.domain.errors import ConfigError, ForbiddenError

# Why the server builds the graph, as LangGraph's ServerRuntime.access_context says.
AccessContext = Literal["threads.create_run", "threads.update", "threads.read", "assistants.read"]
EXECUTION = "threads.create_run"
Arguments = Callable[[dict[str, Any], "GraphAccess"], dict[str, Any]]


@dataclass(kw_only=True, frozen=True)
class GraphAccess:
    """Runyard's ServerRuntime: what a factory learns about the use of its graph.

    The same fields and helpers as langgraph-sdk's ServerRuntime (`access_context`, `user`,
    `store`, `context`, `execution_runtime`, `ensure_user`).
    """

    access_context: AccessContext
    user: Any = None
    store: BaseStore | None = None
    context: Any = field(default=None)

    @property
    def execution_runtime(self) -> GraphAccess | None:
        """This runtime when the graph is built to execute a run, else None."""
        return self if self.access_context == EXECUTION else None

    def ensure_user(self) -> Any:
        """The authenticated user; PermissionError when there is none."""
        if self.user is None:
            raise ForbiddenError("this graph needs an authenticated user")
        return self.user


def factory_arguments(fn: Callable[..., Any], where: str) -> Arguments:
    """How to call `fn`: nothing, its config, a runtime, or both (by keyword)."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return lambda config, access: {}
    try:
        hints = typing.get_type_hints(
            fn, localns={"ServerRuntime": ServerRuntime, "Runtime": Runtime}
        )
    except Exception:  # unresolvable annotations: fall back to the raw ones
        hints = {}
    kinds = [_runtime_kind(hints.get(p.name, p.annotation)) for p in params]
    if not params:
        return lambda config, access: {}
    if len(params) == 1:
        name, kind = params[0].name, kinds[0]
        if kind is None:
            return lambda config, access: {name: config}
        return lambda config, access: {name: _runtime_for(kind, access)}
    if len(params) == 2 and sum(k is not None for k in kinds) == 1:
        rt_index = 0 if kinds[0] is not None else 1
        rt_name, rt_kind = params[rt_index].name, kinds[rt_index]
        cfg_name = params[1 - rt_index].name
        assert rt_kind is not None
        return lambda config, access: {
            rt_name: _runtime_for(rt_kind, access),
            cfg_name: config,
        }
    raise ConfigError(
        f"{where}: a graph factory takes nothing, a config, a ServerRuntime / Runtime, or a "
        f"config and a runtime; got parameters {[p.name for p in params]}"
    )


def _runtime_kind(annotation: Any) -> str | None:
    """`server` for ServerRuntime, `langgraph` for langgraph.runtime.Runtime, None otherwise."""
    if annotation is inspect.Parameter.empty:
        return None
    origin = get_origin(annotation)
    if annotation is ServerRuntime or origin is ServerRuntime:
        return "server"
    if annotation is Runtime or origin is Runtime:
        return "langgraph"
    if isinstance(annotation, type) and issubclass(annotation, Runtime):
        return "langgraph"
    if origin is typing.Annotated:
        return _runtime_kind(get_args(annotation)[0])
    return None


def _runtime_for(kind: str, access: GraphAccess) -> Any:
    if kind == "server":
        return access
    return Runtime(context=access.context, store=access.store)


@asynccontextmanager
async def entered(value: Any) -> AsyncIterator[Any]:
    """What a factory returned, awaited or entered (an async or plain context manager)."""
    if hasattr(value, "__aenter__") and hasattr(value, "__aexit__"):
        async with value as result:
            yield result
    elif hasattr(value, "__enter__") and hasattr(value, "__exit__"):
        with value as result:
            yield result
    elif inspect.isawaitable(value):
        yield await value
    else:
        yield value
