"""Graphs that report what the server passes them: the user, headers, their runtime."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, TypedDict

from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from langgraph_sdk.runtime import ServerRuntime

# What the context-manager factory did, per run id (read back through the custom app).
FACTORY_EVENTS: list[str] = []


class Seen(TypedDict, total=False):
    """What each node saw in its config."""

    first: dict[str, Any]
    second: dict[str, Any]
    built_for: str


def _seen(config: RunnableConfig) -> dict[str, Any]:
    configurable = config.get("configurable") or {}
    user = configurable.get("langgraph_auth_user")
    return {
        "identity": user.identity if user is not None else None,
        "identity_by_key": user["identity"] if user is not None else None,
        "user_id": configurable.get("langgraph_auth_user_id"),
        "permissions": configurable.get("langgraph_auth_permissions"),
        "x-tenant": configurable.get("x-tenant"),
        "x-hidden": configurable.get("x-hidden"),
    }


def first(state: Seen, config: RunnableConfig) -> Seen:
    """Record what the first node sees."""
    return {"first": _seen(config)}


def second(state: Seen, config: RunnableConfig) -> Seen:
    """Record what the second node sees."""
    return {"second": _seen(config)}


builder = StateGraph(Seen)
builder.add_node("first", first)
builder.add_node("second", second)
builder.add_edge(START, "first")
builder.add_edge("first", "second")
builder.add_edge("second", END)
who = builder.compile()


def _reporting(text: str) -> Any:
    b = StateGraph(Seen)
    b.add_node("report", lambda state: {"built_for": text})
    b.add_edge(START, "report")
    b.add_edge("report", END)
    return b.compile()


def for_user(runtime: ServerRuntime) -> Any:
    """A factory that builds the graph for the user it is built for."""
    user = runtime.user.identity if runtime.user is not None else "nobody"
    return _reporting(f"{runtime.access_context}:{user}")


@asynccontextmanager
async def managed(config: RunnableConfig) -> AsyncIterator[Any]:
    """A factory holding a resource for the length of each run."""
    run_id = config["configurable"].get("run_id")
    FACTORY_EVENTS.append(f"setup:{run_id}")
    try:
        yield _reporting(f"managed:{run_id}")
    finally:
        FACTORY_EVENTS.append(f"teardown:{run_id}")
