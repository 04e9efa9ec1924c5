"""Three nodes that each write one custom event and append their name: a chat turn's shape.

A stream of it in `values` and `custom` modes carries a known set of events (the input's
values, then per node one custom event and one values event), so a client can tell a
complete stream from one that lost an event.
"""

from __future__ import annotations

import operator
from typing import Annotated, Any

from langgraph.config import get_stream_writer
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

NODES = ("n1", "n2", "n3")


class Relay(TypedDict, total=False):
    """The nodes passed so far."""

    seen: Annotated[list[str], operator.add]


def _node(name: str) -> Any:
    def run(state: Relay) -> dict[str, Any]:
        get_stream_writer()({"node": name})
        return {"seen": [name]}

    return run


builder = StateGraph(Relay).add_sequence([(node, _node(node)) for node in NODES])
builder.add_edge(START, NODES[0])
builder.add_edge(NODES[-1], END)
graph = builder.compile()
