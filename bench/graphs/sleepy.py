"""A one-node graph that sleeps 1 s without blocking the event loop, then bumps a counter.

The sleepers scenario starts many of these at once: the runs wait rather than compute, so what
it measures is how many runs the server keeps in flight and how soon it drains them.
"""

from __future__ import annotations

import asyncio
from typing import TypedDict

from langgraph.graph import END, START, StateGraph


class Counter(TypedDict, total=False):
    """A single counter."""

    n: int


async def doze(state: Counter) -> Counter:
    """Sleep 1 s, then add one to the counter."""
    await asyncio.sleep(1)
    return {"n": state.get("n", 0) + 1}


builder = StateGraph(Counter)
builder.add_node("doze", doze)
builder.add_edge(START, "doze")
builder.add_edge("doze", END)
graph = builder.compile()
