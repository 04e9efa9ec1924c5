"""A one-node graph that returns at once, so a benchmark measures the server, not the graph."""

from __future__ import annotations

from typing import TypedDict

from langgraph.graph import END, START, StateGraph


class Counter(TypedDict, total=False):
    """A single counter."""

    n: int


def bump(state: Counter) -> Counter:
    """Add one to the counter."""
    return {"n": state.get("n", 0) + 1}


builder = StateGraph(Counter)
builder.add_node("bump", bump)
builder.add_edge(START, "bump")
builder.add_edge("bump", END)
graph = builder.compile()
