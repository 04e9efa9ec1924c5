"""Graphs with controllable behaviour for run tests: slow, failing, interrupting, echoing."""

from __future__ import annotations

import asyncio
import operator
from typing import Annotated, Any

from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt
from typing_extensions import TypedDict


class SlowState(TypedDict, total=False):
    """How long each step sleeps, and which steps ran."""

    seconds: float
    steps: Annotated[list[str], operator.add]


async def first(state: SlowState) -> dict[str, Any]:
    """Sleep, then record the step."""
    await asyncio.sleep(float(state.get("seconds", 1.0)))
    return {"steps": ["first"]}


async def second(state: SlowState) -> dict[str, Any]:
    """Sleep, then record the step."""
    await asyncio.sleep(float(state.get("seconds", 1.0)))
    return {"steps": ["second"]}


_slow = StateGraph(SlowState)
_slow.add_node("first", first)
_slow.add_node("second", second)
_slow.add_edge(START, "first")
_slow.add_edge("first", "second")
_slow.add_edge("second", END)
slow = _slow.compile()


class EchoState(TypedDict, total=False):
    """A value passed through, and who saw it."""

    value: Any
    seen: Annotated[list[str], operator.add]


def echo_node(state: EchoState) -> dict[str, Any]:
    """Record that the node ran."""
    return {"seen": ["echo"]}


def boom(state: EchoState) -> dict[str, Any]:
    """Always fail, with a readable message."""
    raise ValueError(f"boom: cannot process {state.get('value')!r}")


_fail = StateGraph(EchoState)
_fail.add_node("echo", echo_node)
_fail.add_node("boom", boom)
_fail.add_edge(START, "echo")
_fail.add_edge("echo", "boom")
_fail.add_edge("boom", END)
fail = _fail.compile()


def ask(state: EchoState) -> dict[str, Any]:
    """Pause for a human answer."""
    answer = interrupt({"question": "continue?", "value": state.get("value")})
    return {"seen": [f"answer:{answer}"]}


_ask = StateGraph(EchoState)
_ask.add_node("echo", echo_node)
_ask.add_node("ask", ask)
_ask.add_edge(START, "echo")
_ask.add_edge("echo", "ask")
_ask.add_edge("ask", END)
asker = _ask.compile()


def nul_text(state: EchoState) -> dict[str, Any]:
    """Return text holding a NUL character (as a tool's output may): PostgreSQL's JSON
    type cannot store it."""
    return {"value": "tool output\x00with a NUL", "seen": ["nul"]}


_nul = StateGraph(EchoState)
_nul.add_node("nul", nul_text)
_nul.add_edge(START, "nul")
_nul.add_edge("nul", END)
nul = _nul.compile()


def provider_timeout(state: EchoState) -> dict[str, Any]:
    """Fail as a node whose model provider did not answer in time."""
    raise TimeoutError("the model provider did not answer within 30 s")


_provider_timeout = StateGraph(EchoState)
_provider_timeout.add_node("call_model", provider_timeout)
_provider_timeout.add_edge(START, "call_model")
_provider_timeout.add_edge("call_model", END)
node_timeout = _provider_timeout.compile()


async def slow_build(config: dict[str, Any]) -> Any:
    """A factory that takes `configurable.build_seconds` to build the echo graph."""
    await asyncio.sleep(float(config.get("configurable", {}).get("build_seconds", 0)))
    builder = StateGraph(EchoState)
    builder.add_node("echo", echo_node)
    builder.add_edge(START, "echo")
    builder.add_edge("echo", END)
    return builder.compile()
