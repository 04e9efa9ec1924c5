"""Graphs for dispatch-order tests: `gate` holds its worker slot until a file exists;
`stamp` appends its input's `tag` to $ORDER_FILE, so the file lists runs in start order."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict


class GateState(TypedDict, total=False):
    """The file whose existence opens the gate."""

    gate: str


async def wait_for_gate(state: GateState) -> dict[str, Any]:
    """Return once the file exists (at most 60 s)."""
    path = Path(state["gate"])
    for _ in range(600):
        if path.exists():
            break
        await asyncio.sleep(0.1)
    return {}


class StampState(TypedDict, total=False):
    """The run's label in the order file."""

    tag: str


async def stamp_order(state: StampState) -> dict[str, Any]:
    """Append the tag as one line of $ORDER_FILE."""
    line = f"{state['tag']}\n"
    await asyncio.to_thread(_append, Path(os.environ["ORDER_FILE"]), line)
    return {}


def _append(path: Path, line: str) -> None:
    with path.open("a") as out:
        out.write(line)


_gate = StateGraph(GateState)
_gate.add_node("wait_for_gate", wait_for_gate)
_gate.add_edge(START, "wait_for_gate")
_gate.add_edge("wait_for_gate", END)
gate = _gate.compile()

_stamp = StateGraph(StampState)
_stamp.add_node("stamp_order", stamp_order)
_stamp.add_edge(START, "stamp_order")
_stamp.add_edge("stamp_order", END)
stamp = _stamp.compile()
