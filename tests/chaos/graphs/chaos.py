"""Graphs for the chaos tests: they log what they do (with the pid) so tests see who ran what."""

from __future__ import annotations

import asyncio
import json
import operator
import os
import signal
import time
from collections.abc import Awaitable
from pathlib import Path
from typing import Annotated, Any, Protocol

from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

STEP_NODES = ("s1", "s2", "s3", "s4", "s5")


class StepsState(TypedDict, total=False):
    """Where to log, how long each node sleeps, and which node attempts completed."""

    log: str
    delay: float
    done: Annotated[list[dict[str, Any]], operator.add]


def log_line(path: str, config: RunnableConfig, node: str, phase: str) -> dict[str, Any]:
    """Append one JSON line (atomic with O_APPEND for lines this small) and return it."""
    line = {
        "run_id": str(config["configurable"]["run_id"]),
        "node": node,
        "phase": phase,
        "pid": os.getpid(),
        "attempt": int(config["metadata"]["run_attempt"]),
        "t": time.time(),
    }
    with Path(path).open("a", encoding="utf-8") as out:
        out.write(json.dumps(line) + "\n")
    return line


class StepNode(Protocol):
    """A node of the steps graph."""

    def __call__(self, state: StepsState, config: RunnableConfig) -> Awaitable[dict[str, Any]]:
        """Run the node."""
        ...


def step(node: str) -> StepNode:
    """A node that logs its start, sleeps `delay`, logs its end and records who ran it."""

    async def run(state: StepsState, config: RunnableConfig) -> dict[str, Any]:
        log_line(state["log"], config, node, "start")
        await asyncio.sleep(float(state.get("delay", 0.5)))
        line = log_line(state["log"], config, node, "done")
        return {"done": [{"node": node, "pid": line["pid"], "attempt": line["attempt"]}]}

    return run


def _chain() -> Any:
    builder = StateGraph(StepsState).add_sequence([(name, step(name)) for name in STEP_NODES])
    builder.add_edge(START, STEP_NODES[0])
    builder.add_edge(STEP_NODES[-1], END)
    return builder.compile()


steps = _chain()


class SuicideState(TypedDict, total=False):
    """Where to log before dying."""

    log: str


def die(state: SuicideState, config: RunnableConfig) -> dict[str, Any]:
    """Log the attempt, then SIGKILL the process executing the run (poison input)."""
    log_line(state["log"], config, "die", "start")
    os.kill(os.getpid(), signal.SIGKILL)
    return {}


_suicide = StateGraph(SuicideState)
_suicide.add_node("die", die)
_suicide.add_edge(START, "die")
_suicide.add_edge("die", END)
suicide = _suicide.compile()


class ShortState(TypedDict, total=False):
    """How long the one node sleeps, and a counter it bumps."""

    delay: float
    count: int


async def nap(state: ShortState) -> dict[str, Any]:
    """Sleep briefly: a cheap run for backlog tests."""
    await asyncio.sleep(float(state.get("delay", 0.05)))
    return {"count": int(state.get("count", 0)) + 1}


_short = StateGraph(ShortState)
_short.add_node("nap", nap)
_short.add_edge(START, "nap")
_short.add_edge("nap", END)
short = _short.compile()


TALLY_NODES = ("a", "b", "c")


class TallyState(TypedDict, total=False):
    """How long each node sleeps, and `run_id:node` marks in the order the nodes ran."""

    delay: float
    marks: Annotated[list[str], operator.add]


def mark(node: str) -> Any:
    """A node that sleeps `delay`, then appends `run_id:node`."""

    async def run(state: TallyState, config: RunnableConfig) -> dict[str, Any]:
        await asyncio.sleep(float(state.get("delay", 0.01)))
        return {"marks": [f"{config['configurable']['run_id']}:{node}"]}

    return run


def _tally() -> Any:
    builder = StateGraph(TallyState).add_sequence([(name, mark(name)) for name in TALLY_NODES])
    builder.add_edge(START, TALLY_NODES[0])
    builder.add_edge(TALLY_NODES[-1], END)
    return builder.compile()


tally = _tally()
