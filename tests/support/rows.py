"""Rows of the threads and runs tables, for tests that call the db layer directly."""

from __future__ import annotations

from typing import Any


def thread_row(thread_id: str) -> dict[str, Any]:
    """A busy thread with no state yet."""
    return {
        "thread_id": thread_id,
        "metadata": {},
        "config": {},
        "status": "busy",
        "values": None,
        "interrupts": {},
    }


def run_row(run_id: str, thread_id: str, multitask_strategy: str = "reject") -> dict[str, Any]:
    """A pending run of assistant `a`, never attempted."""
    return {
        "run_id": run_id,
        "thread_id": thread_id,
        "assistant_id": "a",
        "status": "pending",
        "metadata": {},
        "kwargs": {},
        "multitask_strategy": multitask_strategy,
        "attempt": 0,
        "temporary": False,
    }
