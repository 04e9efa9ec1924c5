"""The body /wait and /join answer for a run, as LangGraph Platform shapes it."""

from __future__ import annotations

from typing import Any


def with_interrupts(values: Any, interrupts: list[Any]) -> Any:
    """The thread's values, with `__interrupt__` beside them while interrupts are pending.

    Clients read both from one answer: the state so far (`out["log"]`) and the question.
    Values that are not an object (a graph whose state is a list, say) cannot hold the key,
    so only the interrupts are answered then.
    """
    if not interrupts:
        return values
    base = values if isinstance(values, dict) else {}
    return {**base, "__interrupt__": interrupts}
