"""The fenced checkpointer view: skips a known-empty first read, needs a saver that fences."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

from runyard.checkpoints.checkpointer import fenced


class CountingSaver(InMemorySaver):
    """An in-memory saver that counts the reads it answers (its fenced copy is itself: the
    fence's statements are tested on the real savers, tests/integration)."""

    def __init__(self) -> None:
        super().__init__()
        self.reads: list[str] = []

    def fenced_to(self, run_id: str, attempt: int) -> CountingSaver:
        return self

    async def aget_tuple(self, config: Any) -> Any:
        self.reads.append(config["configurable"].get("checkpoint_ns", ""))
        return await super().aget_tuple(config)


class State(TypedDict, total=False):
    n: int


def _graph() -> Any:
    builder = StateGraph(State)
    builder.add_node("bump", lambda state: {"n": state.get("n", 0) + 1})
    builder.add_edge(START, "bump")
    builder.add_edge("bump", END)
    return builder.compile()


def _config(thread_id: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread_id}}


async def test_a_known_empty_thread_skips_only_the_first_read() -> None:
    saver = CountingSaver()
    thread_id = str(uuid.uuid4())
    view = fenced(saver, "r", 1, empty=True)
    graph = _graph().copy(update={"checkpointer": view})
    assert await graph.ainvoke({"n": 1}, _config(thread_id)) == {"n": 2}
    # LangGraph's opening read was answered by the view; the run's checkpoints were written.
    assert saver.reads == []
    stored = await saver.aget_tuple(_config(thread_id))
    assert stored is not None and stored.checkpoint["channel_values"]["n"] == 2
    # Any later read goes to the saver.
    assert (await view.aget_tuple(_config(thread_id))) is not None


async def test_without_the_hint_every_read_goes_to_the_saver() -> None:
    saver = CountingSaver()
    thread_id = str(uuid.uuid4())
    graph = _graph().copy(update={"checkpointer": saver})
    await graph.ainvoke({"n": 1}, _config(thread_id))
    view = fenced(saver, "r", 1)
    again = _graph().copy(update={"checkpointer": view})
    saver.reads.clear()
    # Resumed with no input, the run answers the state the first run left: it was read.
    assert await again.ainvoke(None, _config(thread_id)) == {"n": 2}
    assert saver.reads and saver.reads[0] == ""


async def test_a_subgraph_namespace_is_never_skipped() -> None:
    saver = CountingSaver()
    view = fenced(saver, "r", 1, empty=True)
    config = {"configurable": {"thread_id": "t", "checkpoint_ns": "child:1"}}
    assert await view.aget_tuple(config) is None
    assert saver.reads == ["child:1"]
    # The root namespace's first read is still the known-empty one.
    assert await view.aget_tuple(_config("t")) is None
    assert saver.reads == ["child:1"]


async def test_after_a_write_the_hint_no_longer_holds() -> None:
    saver = CountingSaver()
    thread_id = str(uuid.uuid4())
    view = fenced(saver, "r", 1, empty=True)
    written = {"configurable": {"thread_id": thread_id, "checkpoint_ns": "", "checkpoint_id": "c"}}
    await view.aput_writes(written, [("n", 1)], "task")
    await view.aget_tuple(_config(thread_id))
    assert saver.reads == [""]


async def test_a_saver_that_cannot_fence_is_refused() -> None:
    with pytest.raises(TypeError, match="InMemorySaver cannot fence"):
        fenced(InMemorySaver(), "r", 1)
