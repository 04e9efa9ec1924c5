"""A graph importing its own package by name, and a sibling module relatively."""

from typing import TypedDict

from langgraph.graph import END, START, StateGraph

from app.tools import shout

from .wording import signature


class State(TypedDict, total=False):
    text: str
    module: str


def speak(state: State) -> State:
    return {"text": shout(state["text"]) + signature(), "module": __name__}


builder = StateGraph(State)
builder.add_node("speak", speak)
builder.add_edge(START, "speak")
builder.add_edge("speak", END)
graph = builder.compile()
