"""`steps` steps of `delay` seconds, each checkpointed and signed by its instance, then a title."""

import asyncio
import operator
from typing import Annotated, TypedDict

from langgraph.graph import END, START, StateGraph

from app.naming import instance_name, title


class State(TypedDict, total=False):
    word: str
    steps: int
    delay: float
    done: Annotated[list[str], operator.add]
    title: str


async def step(state: State) -> State:
    await asyncio.sleep(state.get("delay", 0.0))
    return {"done": [instance_name()]}


def more(state: State) -> str:
    return "step" if len(state.get("done", [])) < state.get("steps", 1) else "finish"


def finish(state: State) -> State:
    return {"title": title(state.get("word", ""))}


builder = StateGraph(State)
builder.add_node("step", step)
builder.add_node("finish", finish)
builder.add_edge(START, "step")
builder.add_conditional_edges("step", more, ["step", "finish"])
builder.add_edge("finish", END)
graph = builder.compile()
