"""Two nodes: the first records which process executes the run, the second sleeps.

The recovery scenario reads `pid` from the thread state to learn which instance to kill while
the run sleeps in `nap`; `finished_by` then says which process completed it.
"""

from __future__ import annotations

import asyncio
import os
from typing import TypedDict

from langgraph.graph import END, START, StateGraph


class Nap(TypedDict, total=False):
    """How long to sleep, and the processes that started and finished the run."""

    sleep: float
    pid: int
    finished_by: int


def mark(state: Nap) -> Nap:
    """Record the executing process, committed in the checkpoint before the nap starts."""
    return {"pid": os.getpid()}


async def nap(state: Nap) -> Nap:
    """Sleep without blocking the server's event loop, then say who finished."""
    await asyncio.sleep(float(state.get("sleep", 5.0)))
    return {"finished_by": os.getpid()}


builder = StateGraph(Nap)
builder.add_node("mark", mark)
builder.add_node("nap", nap)
builder.add_edge(START, "mark")
builder.add_edge("mark", "nap")
builder.add_edge("nap", END)
graph = builder.compile()
