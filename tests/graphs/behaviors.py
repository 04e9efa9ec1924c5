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
