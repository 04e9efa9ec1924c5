"""A graph with nested subgraphs and a context schema, for the assistants introspection tests."""

from __future__ import annotations

import operator
from typing import Annotated, Any

from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict


class StepsState(TypedDict, total=False):
    """The names of the nodes that ran, in order."""

    steps: Annotated[list[str], operator.add]


class Context(TypedDict, total=False):
    """Static settings an assistant can give the graph."""

    greeting: str


def step(name: str) -> Any:
    """A node that records its own name."""

    def run(state: StepsState) -> dict[str, Any]:
        return {"steps": [name]}

    run.__name__ = name
    return run


def chain(*names: str, inner: tuple[str, Any] | None = None, **kwargs: Any) -> Any:
    """A linear graph of recording nodes, with an optional subgraph node in the middle."""
    builder = StateGraph(StepsState, **kwargs)
    order = list(names)
    for name in names:
        builder.add_node(name, step(name))
    if inner is not None:
        builder.add_node(inner[0], inner[1])
        order.insert(1, inner[0])
    previous = START
    for name in order:
        builder.add_edge(previous, name)
        previous = name
    builder.add_edge(previous, END)
    return builder.compile()


leaf = chain("leaf_1", "leaf_2")
child = chain("child_1", "child_2", inner=("inner", leaf))
graph = chain("parent_start", "parent_end", inner=("child", child), context_schema=Context)
