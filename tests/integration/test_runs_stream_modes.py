"""Every stream mode through langgraph-sdk: event names and payloads as LangGraph sends them."""

from __future__ import annotations

import itertools
import re
from typing import Any

import httpx
from langgraph_sdk.client import LangGraphClient

from tests.support.runs import (
    CHAT_REPLY,
    collect,
    data_of,
    names,
    new_thread,
    state,
)

HELLO: dict[str, Any] = {"messages": [{"role": "user", "content": "hello"}]}
PIPELINE_INPUT: dict[str, Any] = {"text": "a bb ccc"}
NODES = ["tokenize", "analyze", "report"]


async def test_default_mode_is_values(client: LangGraphClient) -> None:
    thread_id = await new_thread(client)
    parts = await collect(
        client.runs.stream(thread_id, "pipeline", input=PIPELINE_INPUT, if_not_exists="create")
    )
    assert names(parts) == ["metadata", "values", "values", "values", "values"]
    metadata = parts[0].data
    assert set(metadata) >= {"run_id", "attempt"}
    assert metadata["attempt"] == 1
    runs = await client.runs.list(thread_id)
    assert metadata["run_id"] == runs[0]["run_id"]
    values = data_of(parts, "values")
    assert values[0] == {**PIPELINE_INPUT, "steps": []}
    assert [v["steps"] for v in values[1:]] == [NODES[:1], NODES[:2], NODES]
    assert values[-1]["summary"] == "3 words, longest word: 'ccc'"


async def test_values_mode_as_string_or_list_is_the_same(client: LangGraphClient) -> None:
    as_string = await collect(
        client.runs.stream(None, "pipeline", input=PIPELINE_INPUT, stream_mode="values")
    )
    as_list = await collect(
        client.runs.stream(None, "pipeline", input=PIPELINE_INPUT, stream_mode=["values"])
    )
    assert names(as_string) == names(as_list)
    assert data_of(as_string, "values") == data_of(as_list, "values")


async def test_updates_mode(client: LangGraphClient) -> None:
    parts = await collect(
        client.runs.stream(None, "pipeline", input=PIPELINE_INPUT, stream_mode="updates")
    )
    assert names(parts) == ["metadata", "updates", "updates", "updates"]
    updates = data_of(parts, "updates")
    assert [list(u) for u in updates] == [[n] for n in NODES]
    assert updates[0]["tokenize"] == {"steps": ["tokenize"], "word_count": 3}


async def test_messages_mode_sends_metadata_then_accumulated_partials(
    client: LangGraphClient,
) -> None:
    parts = await collect(client.runs.stream(None, "agent", input=HELLO, stream_mode="messages"))
    event_names = names(parts)
    assert event_names[0] == "metadata"
    assert event_names[1] == "messages/metadata"
    assert set(event_names[2:]) == {"messages/partial"}
    assert event_names.count("messages/metadata") == 1

    (meta,) = data_of(parts, "messages/metadata")
    (message_id,) = meta
    assert meta[message_id]["metadata"]["langgraph_node"] == "respond"

    partials = data_of(parts, "messages/partial")
    assert len(partials) >= 5
    contents = []
    for partial in partials:
        assert isinstance(partial, list) and len(partial) == 1
        message = partial[0]
        assert message["type"] == "ai"
        assert message["id"] == message_id
        contents.append(message["content"])
    # Each partial holds everything so far: a growing prefix of the reply.
    for before, after in itertools.pairwise(contents):
        assert after.startswith(before)
    assert contents[-1] == CHAT_REPLY
    assert contents[0] == "Hello!"


async def test_messages_tuple_mode_sends_chunk_and_metadata(client: LangGraphClient) -> None:
    parts = await collect(
        client.runs.stream(None, "agent", input=HELLO, stream_mode="messages-tuple")
    )
    event_names = names(parts)
    assert event_names[0] == "metadata"
    assert set(event_names[1:]) == {"messages"}
    pairs = data_of(parts, "messages")
    assert len(pairs) >= 5
    text = ""
    for pair in pairs:
        assert isinstance(pair, list) and len(pair) == 2
        chunk, metadata = pair
        assert chunk["type"] == "AIMessageChunk"
        assert metadata["langgraph_node"] == "respond"
        text += chunk["content"]
    assert text == CHAT_REPLY
    assert len({chunk["id"] for chunk, _ in pairs}) == 1


async def test_custom_mode(client: LangGraphClient) -> None:
    parts = await collect(
        client.runs.stream(None, "pipeline", input=PIPELINE_INPUT, stream_mode="custom")
    )
    assert names(parts) == ["metadata", "custom", "custom", "custom"]
    assert data_of(parts, "custom") == [
        {"step": "tokenize", "progress": 33, "words": 3},
        {"step": "analyze", "progress": 66, "longest": "ccc"},
        {"step": "report", "progress": 100},
    ]


async def test_several_modes_interleave_in_execution_order(client: LangGraphClient) -> None:
    parts = await collect(
        client.runs.stream(
            None, "pipeline", input=PIPELINE_INPUT, stream_mode=["values", "updates", "custom"]
        )
    )
    assert names(parts) == [
        "metadata",
        "values",
        *(["custom", "updates", "values"] * 3),
    ]


async def test_events_mode(client: LangGraphClient) -> None:
    parts = await collect(
        client.runs.stream(None, "pipeline", input=PIPELINE_INPUT, stream_mode="events")
    )
    event_names = names(parts)
    assert event_names[0] == "metadata"
    assert set(event_names[1:]) == {"events"}
    events = data_of(parts, "events")
    assert events[0]["event"] == "on_chain_start"
    assert events[0]["data"]["input"] == PIPELINE_INPUT
    # The root run of astream_events carries the API run id.
    assert events[0]["run_id"] == parts[0].data["run_id"]
    assert events[-1]["event"] == "on_chain_end"
    for event in events:
        assert set(event) >= {"event", "name", "run_id", "tags", "metadata"}
    ended = {e["name"] for e in events if e["event"] == "on_chain_end"}
    assert set(NODES) <= ended
    assert any(e["event"] == "on_custom_event" or e["event"] == "on_chain_stream" for e in events)


async def test_events_mode_carries_chat_model_tokens(client: LangGraphClient) -> None:
    parts = await collect(client.runs.stream(None, "agent", input=HELLO, stream_mode="events"))
    events = data_of(parts, "events")
    tokens = [e["data"]["chunk"]["content"] for e in events if e["event"] == "on_chat_model_stream"]
    assert "".join(tokens) == CHAT_REPLY


async def test_debug_mode(client: LangGraphClient) -> None:
    thread_id = await new_thread(client)
    parts = await collect(
        client.runs.stream(
            thread_id, "pipeline", input=PIPELINE_INPUT, stream_mode="debug", if_not_exists="create"
        )
    )
    event_names = names(parts)
    assert event_names[0] == "metadata"
    assert set(event_names[1:]) == {"debug"}
    debug = data_of(parts, "debug")
    for item in debug:
        assert set(item) >= {"step", "timestamp", "type", "payload"}
        assert item["type"] in ("checkpoint", "task", "task_result")
    assert debug[0]["type"] == "checkpoint"
    assert debug[0]["step"] == -1
    assert debug[0]["payload"]["next"] == ["__start__"]
    tasks = [d["payload"]["name"] for d in debug if d["type"] == "task"]
    assert tasks == NODES
    results = [d for d in debug if d["type"] == "task_result"]
    assert [r["payload"]["name"] for r in results] == NODES
    assert all(r["payload"]["error"] is None for r in results)
    assert results[0]["payload"]["result"] == {"steps": ["tokenize"], "word_count": 3}


async def test_tasks_mode(client: LangGraphClient) -> None:
    parts = await collect(
        client.runs.stream(None, "pipeline", input=PIPELINE_INPUT, stream_mode="tasks")
    )
    assert names(parts) == ["metadata", *(["tasks"] * 6)]
    tasks = data_of(parts, "tasks")
    starts, results = tasks[0::2], tasks[1::2]
    assert [s["name"] for s in starts] == NODES
    assert [r["name"] for r in results] == NODES
    for start, result in zip(starts, results, strict=True):
        assert set(start) >= {"id", "name", "input", "triggers"}
        assert set(result) >= {"id", "name", "error", "result", "interrupts"}
        assert start["id"] == result["id"]
        assert result["error"] is None
    assert starts[0]["input"] == {**PIPELINE_INPUT, "steps": []}
    assert results[-1]["result"]["steps"] == ["report"]


async def test_checkpoints_mode(client: LangGraphClient) -> None:
    thread_id = await new_thread(client)
    parts = await collect(
        client.runs.stream(
            thread_id,
            "pipeline",
            input=PIPELINE_INPUT,
            stream_mode="checkpoints",
            if_not_exists="create",
        )
    )
    event_names = names(parts)
    assert event_names == ["metadata", *(["checkpoints"] * 5)]
    checkpoints = data_of(parts, "checkpoints")
    for checkpoint in checkpoints:
        assert set(checkpoint) >= {"config", "parent_config", "values", "metadata", "next", "tasks"}
        assert checkpoint["config"]["configurable"]["checkpoint_id"]
    assert checkpoints[0]["metadata"]["source"] == "input"
    assert checkpoints[0]["next"] == ["__start__"]
    assert [c["metadata"]["step"] for c in checkpoints] == [-1, 0, 1, 2, 3]
    assert checkpoints[-1]["next"] == []
    assert checkpoints[-1]["values"]["steps"] == NODES
    ids = [c["config"]["configurable"]["checkpoint_id"] for c in checkpoints]
    assert len(set(ids)) == len(ids)
    for parent, child in itertools.pairwise(checkpoints):
        assert (
            child["parent_config"]["configurable"]["checkpoint_id"]
            == (parent["config"]["configurable"]["checkpoint_id"])
        )


async def test_subgraph_events_are_named_with_their_namespace(client: LangGraphClient) -> None:
    parts = await collect(
        client.runs.stream(
            None, "subgraph", input=state(steps=[]), stream_mode="updates", stream_subgraphs=True
        )
    )
    event_names = names(parts)
    child = re.compile(r"^updates\|child:[0-9a-f-]{36}$")
    inner = re.compile(r"^updates\|child:[0-9a-f-]{36}\|inner:[0-9a-f-]{36}$")
    assert [n for n in event_names if child.match(n)], event_names
    assert [n for n in event_names if inner.match(n)], event_names
    assert all(
        n in ("metadata", "updates") or child.match(n) or inner.match(n) for n in event_names
    )
    by_name = {}
    for part in parts:
        if part.event.startswith("updates|"):
            by_name.update(part.data)
    assert set(by_name) >= {"child_1", "child_2", "leaf_1", "leaf_2"}
    top = [list(u) for u in data_of(parts, "updates")]
    assert top == [["parent_start"], ["child"], ["parent_end"]]


async def test_subgraph_values_and_several_modes_are_namespaced(client: LangGraphClient) -> None:
    parts = await collect(
        client.runs.stream(
            None,
            "subgraph",
            input=state(steps=[]),
            stream_mode=["values", "tasks"],
            stream_subgraphs=True,
        )
    )
    event_names = set(names(parts))
    assert any(re.match(r"^values\|child:", n) for n in event_names), event_names
    assert any(re.match(r"^tasks\|child:[^|]+\|inner:", n) for n in event_names), event_names
    assert not any(n.startswith("updates") for n in event_names)


async def test_without_stream_subgraphs_only_the_parent_streams(client: LangGraphClient) -> None:
    parts = await collect(
        client.runs.stream(None, "subgraph", input=state(steps=[]), stream_mode="updates")
    )
    assert names(parts) == ["metadata", "updates", "updates", "updates"]
    assert [list(u) for u in data_of(parts, "updates")] == [
        ["parent_start"],
        ["child"],
        ["parent_end"],
    ]


async def test_error_event_ends_a_failing_stream(client: LangGraphClient) -> None:
    thread_id = await new_thread(client)
    parts = await collect(
        client.runs.stream(
            thread_id,
            "fail",
            input={"value": "x"},
            stream_mode=["values", "updates"],
            if_not_exists="create",
        )
    )
    event_names = names(parts)
    assert event_names[-1] == "error"
    assert event_names.count("error") == 1
    assert parts[-1].event in ("error", "end")
    (error,) = data_of(parts, "error")
    assert error == {"error": "ValueError", "message": "boom: cannot process 'x'"}
    # The node that ran before the failure still streamed.
    assert {"echo": {"seen": ["echo"]}} in data_of(parts, "updates")


async def test_join_stream_of_a_running_run_gets_the_rest(
    client: LangGraphClient, base_url: str
) -> None:
    thread_id = await new_thread(client)
    run = await client.runs.create(
        thread_id,
        "slow",
        input={"seconds": 0.5},
        stream_mode=["values", "updates"],
        if_not_exists="create",
    )
    parts = await collect(client.runs.join_stream(thread_id, run["run_id"]))
    event_names = names(parts)
    # Joined after the start: at least the last step's events, and the stream ends by itself.
    assert "updates" in event_names
    assert data_of(parts, "values")[-1]["steps"] == ["first", "second"]
    async with httpx.AsyncClient(base_url=base_url) as http:
        current = (await http.get(f"/threads/{thread_id}/runs/{run['run_id']}")).json()
    assert current["status"] == "success"


async def test_join_stream_filters_modes(client: LangGraphClient) -> None:
    thread_id = await new_thread(client)
    run = await client.runs.create(
        thread_id,
        "slow",
        input={"seconds": 0.3},
        stream_mode=["values", "updates"],
        stream_resumable=True,
        if_not_exists="create",
    )
    parts = await collect(
        client.runs.join_stream(thread_id, run["run_id"], stream_mode="updates", last_event_id="0")
    )
    assert set(names(parts)) == {"updates"}
    assert [list(u) for u in data_of(parts, "updates")] == [["first"], ["second"]]
