"""Five steps that each sleep `delay` and append a line to `log` as they start and finish.

The chaos scenario reads the log to count steps that finished more than once (a side effect
repeated) and to find which process executes a run.
"""

from __future__ import annotations

import asyncio
import json
import operator
import os
import time
from pathlib import Path
from typing import Annotated, Any

from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

NODES = ("s1", "s2", "s3", "s4", "s5")


class Steps(TypedDict, total=False):
    """Where to log, how long each step sleeps, and the steps done."""

    log: str
    delay: float
    done: Annotated[list[str], operator.add]


def _line(state: Steps, config: RunnableConfig, node: str, phase: str) -> None:
    line = {
        "run_id": str(config["configurable"]["run_id"]),
        "node": node,
        "phase": phase,
        "pid": os.getpid(),
        "attempt": int(config["metadata"].get("run_attempt", 0)),
        "t": time.time(),
    }
    with Path(state["log"]).open("a", encoding="utf-8") as out:
        out.write(json.dumps(line) + "\n")


def _step(node: str) -> Any:
    async def run(state: Steps, config: RunnableConfig) -> dict[str, Any]:
        _line(state, config, node, "start")
        await asyncio.sleep(float(state.get("delay", 1.0)))
        _line(state, config, node, "done")
        return {"done": [node]}

    return run


builder = StateGraph(Steps).add_sequence([(name, _step(name)) for name in NODES])
builder.add_edge(START, NODES[0])
builder.add_edge(NODES[-1], END)
graph = builder.compile()
