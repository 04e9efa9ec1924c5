"""A graph that writes and reads the long-term store, and a toy embedding for semantic search."""

from __future__ import annotations

import hashlib
from typing import Any

from langgraph.config import get_store
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from typing_extensions import TypedDict

TOY_DIMS = 8


class MemoryState(TypedDict, total=False):
    """Where the memory lives, what to write there (if anything), and what was found."""

    namespace: list[str]
    key: str
    write: dict[str, Any] | None
    found: dict[str, Any] | None


async def remember(state: MemoryState, runtime: Runtime[Any]) -> dict[str, Any]:
    """Write `write` under namespace/key through the runtime's store (when given)."""
    if state.get("write") is not None:
        assert runtime.store is not None, "the server gave the graph no store"
        await runtime.store.aput(tuple(state["namespace"]), state["key"], state["write"])
    return {}


async def recall(state: MemoryState) -> dict[str, Any]:
    """Read namespace/key back through `get_store()`."""
    item = await get_store().aget(tuple(state["namespace"]), state["key"])
    return {"found": item.value if item is not None else None}


_builder = StateGraph(MemoryState)
_builder.add_node("remember", remember)
_builder.add_node("recall", recall)
_builder.add_edge(START, "remember")
_builder.add_edge("remember", "recall")
_builder.add_edge("recall", END)
graph = _builder.compile()


def toy_embed(texts: list[str]) -> list[list[float]]:
    """A deterministic embedding: word hashes folded into TOY_DIMS buckets (no model)."""
    vectors = []
    for text in texts:
        vector = [0.0] * TOY_DIMS
        for word in text.lower().split():
            bucket = int(hashlib.sha1(word.encode()).hexdigest(), 16) % TOY_DIMS
            vector[bucket] += 1.0
        vectors.append(vector)
    return vectors
