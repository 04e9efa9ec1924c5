"""Asks a question with `interrupt` and keeps the answer it is resumed with."""

from typing import TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt


class State(TypedDict, total=False):
    question: str
    answer: str


def ask(state: State) -> State:
    return {"answer": str(interrupt(state.get("question", "?")))}


builder = StateGraph(State)
builder.add_node("ask", ask)
builder.add_edge(START, "ask")
builder.add_edge("ask", END)
graph = builder.compile(name="Asker")
