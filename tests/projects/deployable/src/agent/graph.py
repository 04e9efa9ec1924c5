"""`steps` steps of `delay` seconds, each checkpointed and signed with its number and the
instance that executed it, then a greeting from the project's .env."""

import asyncio
import operator
import os
from typing import Annotated, TypedDict

from langgraph.graph import END, START, StateGraph


class State(TypedDict, total=False):
    steps: int
    delay: float
    done: Annotated[list[str], operator.add]
    greeting: str


async def step(state: State) -> State:
    await asyncio.sleep(state.get("delay", 0.0))
    number = len(state.get("done", []))
    return {"done": [f"{number}@{os.environ.get('RUNYARD_INSTANCE', 'unnamed')}"]}


def more(state: State) -> str:
    return "step" if len(state.get("done", [])) < state.get("steps", 1) else "finish"


def finish(state: State) -> State:
    return {"greeting": os.environ.get("GREETING", "")}


builder = StateGraph(State)
builder.add_node("step", step)
builder.add_node("finish", finish)
builder.add_edge(START, "step")
builder.add_conditional_edges("step", more, ["step", "finish"])
builder.add_edge("finish", END)
graph = builder.compile(name="Steps")
