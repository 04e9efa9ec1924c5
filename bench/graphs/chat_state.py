"""A one-node graph whose state is a list of chat messages: each run appends a reply as long
as the question, so the checkpoints and the thread's values carry some text (what encryption
at rest has to encrypt), while the graph itself costs next to nothing."""

from __future__ import annotations

import operator
from typing import Annotated, Any, TypedDict

from langgraph.graph import END, START, StateGraph


class Chat(TypedDict, total=False):
    """The conversation so far."""

    messages: Annotated[list[dict[str, Any]], operator.add]


def reply(state: Chat) -> Chat:
    """Answer the last message with a message of the same length."""
    last = (state.get("messages") or [{"content": ""}])[-1]
    return {"messages": [{"role": "assistant", "content": str(last.get("content", ""))[::-1]}]}


builder = StateGraph(Chat)
builder.add_node("reply", reply)
builder.add_edge(START, "reply")
builder.add_edge("reply", END)
graph = builder.compile()
