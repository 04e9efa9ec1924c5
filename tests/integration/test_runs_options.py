"""Run options: config, context, metadata, checkpoint_id, command, interrupt_before/after,
if_not_exists, after_seconds and durability."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

from langgraph_sdk.client import LangGraphClient
from langgraph_sdk.schema import Durability

from tests.support.runs import (
    collect,
    data_of,
    kwargs_of,
    new_tag,
    new_thread,
    state,
    status_error,
    values_of,
    wait_for_status,
)

FULL = ["tokenize", "analyze", "report"]


# --- config, context, metadata --------------------------------------------------------------


async def test_config_reaches_the_graph(client: LangGraphClient) -> None:
    thread_id = await new_thread(client)
    # A recursion limit below the pipeline's three steps makes the graph itself fail.
    result = await client.runs.wait(
        thread_id,
        "pipeline",
        input={"text": "a b"},
        config={"recursion_limit": 2},
        if_not_exists="create",
        raise_error=False,
    )
    assert isinstance(result, dict)
    assert result["__error__"]["error"] == "GraphRecursionError"
    run = (await client.runs.list(thread_id))[0]
    assert run["status"] == "error"
    assert kwargs_of(run)["config"]["recursion_limit"] == 2


async def test_config_tags_show_in_events(client: LangGraphClient) -> None:
    tag = f"tag-{uuid.uuid4().hex[:8]}"
    parts = await collect(
        client.runs.stream(
            None, "pipeline", input={"text": "a"}, stream_mode="events", config={"tags": [tag]}
        )
    )
    events = data_of(parts, "events")
    assert events
    assert all(tag in event["tags"] for event in events)


async def test_context_is_stored_and_the_run_succeeds(client: LangGraphClient) -> None:
    thread_id = await new_thread(client)
    run = await client.runs.create(
        thread_id,
        "subgraph",
        input=state(steps=[]),
        context={"greeting": "bonjour"},
        if_not_exists="create",
    )
    assert kwargs_of(run)["context"] == {"greeting": "bonjour"}
    result = await client.runs.join(thread_id, run["run_id"])
    assert "parent_end" in result["steps"]
    assert (await client.runs.get(thread_id, run["run_id"]))["status"] == "success"


async def test_metadata_is_on_the_run_and_in_the_graph_config(client: LangGraphClient) -> None:
    tag = new_tag()
    parts = await collect(
        client.runs.stream(
            None,
            "agent",
            input=state(messages=[{"role": "user", "content": "hello"}]),
            stream_mode="messages-tuple",
            metadata=tag,
        )
    )
    messages = data_of(parts, "messages")
    assert messages
    assert all(metadata["test_tag"] == tag["test_tag"] for _chunk, metadata in messages)


# --- checkpoint_id and command ------------------------------------------------------------------


async def test_checkpoint_id_forks_from_an_earlier_checkpoint(client: LangGraphClient) -> None:
    thread_id = await new_thread(client)
    parts = await collect(
        client.runs.stream(
            thread_id,
            "pipeline",
            input={"text": "a b"},
            stream_mode="checkpoints",
            if_not_exists="create",
        )
    )
    checkpoints = data_of(parts, "checkpoints")
    after_tokenize = next(c for c in checkpoints if c["values"].get("steps") == ["tokenize"])
    checkpoint_id = after_tokenize["config"]["configurable"]["checkpoint_id"]

    # New input from there builds on that checkpoint's state, not on the latest one.
    forked = await client.runs.wait(
        thread_id, "pipeline", input={"text": "x y z"}, checkpoint_id=checkpoint_id
    )
    assert isinstance(forked, dict)
    assert forked["steps"] == ["tokenize", *FULL]
    assert forked["word_count"] == 3
    run = (await client.runs.list(thread_id))[0]
    assert kwargs_of(run)["checkpoint_id"] == checkpoint_id


async def test_checkpoint_object_is_accepted_like_checkpoint_id(client: LangGraphClient) -> None:
    thread_id = await new_thread(client)
    parts = await collect(
        client.runs.stream(
            thread_id,
            "pipeline",
            input={"text": "a b"},
            stream_mode="checkpoints",
            if_not_exists="create",
        )
    )
    first = data_of(parts, "checkpoints")[0]
    checkpoint_id = first["config"]["configurable"]["checkpoint_id"]
    forked = await client.runs.wait(
        thread_id,
        "pipeline",
        input={"text": "x y z"},
        checkpoint={
            "thread_id": thread_id,
            "checkpoint_ns": "",
            "checkpoint_id": checkpoint_id,
            "checkpoint_map": None,
        },
    )
    assert isinstance(forked, dict)
    # Built on the first (empty) checkpoint: one pass of steps, not two.
    assert forked["steps"] == FULL


async def test_command_update_and_goto(client: LangGraphClient) -> None:
    thread_id = await new_thread(client)
    await client.runs.wait(thread_id, "pipeline", input={"text": "a b"}, if_not_exists="create")
    result = await client.runs.wait(
        thread_id, "pipeline", command={"update": {"text": "one two three"}, "goto": "report"}
    )
    assert isinstance(result, dict)
    assert result["text"] == "one two three"
    assert result["steps"] == [*FULL, "report"]
    run = (await client.runs.list(thread_id))[0]
    assert kwargs_of(run)["command"]["goto"] == "report"


async def test_command_goto_a_middle_node_runs_the_rest(client: LangGraphClient) -> None:
    thread_id = await new_thread(client)
    await client.runs.wait(thread_id, "pipeline", input={"text": "a b"}, if_not_exists="create")
    result = await client.runs.wait(thread_id, "pipeline", command={"goto": "analyze"})
    assert isinstance(result, dict)
    assert result["steps"] == [*FULL, "analyze", "report"]


# --- interrupt_before / interrupt_after ---------------------------------------------------------


async def test_interrupt_before_pauses_and_input_none_continues(client: LangGraphClient) -> None:
    thread_id = await new_thread(client)
    parts = await collect(
        client.runs.stream(
            thread_id,
            "pipeline",
            input={"text": "a b"},
            stream_mode="updates",
            interrupt_before=["analyze"],
            if_not_exists="create",
        )
    )
    updates = data_of(parts, "updates")
    assert list(updates[0]) == ["tokenize"]
    assert updates[-1] == {"__interrupt__": []}
    paused = (await client.runs.list(thread_id))[0]
    assert paused["status"] == "success"
    assert kwargs_of(paused)["interrupt_before"] == ["analyze"]
    joined = await client.runs.join(thread_id, paused["run_id"])
    assert joined["steps"] == ["tokenize"]
    assert "summary" not in joined

    resumed = await client.runs.wait(thread_id, "pipeline", input=None)
    assert isinstance(resumed, dict)
    assert resumed["steps"] == FULL


async def test_interrupt_after_pauses_after_the_node(client: LangGraphClient) -> None:
    thread_id = await new_thread(client)
    paused = await client.runs.wait(
        thread_id,
        "pipeline",
        input={"text": "a b"},
        interrupt_after=["analyze"],
        if_not_exists="create",
    )
    assert isinstance(paused, dict)
    assert paused["steps"] == ["tokenize", "analyze"]
    resumed = await client.runs.wait(thread_id, "pipeline", input=None)
    assert isinstance(resumed, dict)
    assert resumed["steps"] == FULL


async def test_interrupt_before_all_nodes(client: LangGraphClient) -> None:
    thread_id = await new_thread(client)
    paused = await client.runs.wait(
        thread_id, "pipeline", input={"text": "a b"}, interrupt_before="*", if_not_exists="create"
    )
    assert isinstance(paused, dict)
    assert paused.get("steps", []) == []
    step = await client.runs.wait(thread_id, "pipeline", input=None, interrupt_before="*")
    assert isinstance(step, dict)
    assert step["steps"] == ["tokenize"]


# --- if_not_exists ------------------------------------------------------------------------------


async def test_if_not_exists_create_makes_the_thread(client: LangGraphClient) -> None:
    thread_id = str(uuid.uuid4())
    first = await client.runs.wait(
        thread_id, "pipeline", input={"text": "a"}, if_not_exists="create"
    )
    assert isinstance(first, dict)
    # The thread exists now: a run without if_not_exists is accepted and sees its state.
    second = await client.runs.wait(thread_id, "pipeline", input={"text": "a"})
    assert isinstance(second, dict)
    assert second["steps"] == FULL + FULL


async def test_if_not_exists_reject_and_default_refuse_unknown_threads(
    client: LangGraphClient,
) -> None:
    thread_id = str(uuid.uuid4())
    status, detail = await status_error(
        client.runs.create(thread_id, "pipeline", input={}, if_not_exists="reject")
    )
    assert status == 404
    assert detail
    status, _ = await status_error(client.runs.create(thread_id, "pipeline", input={}))
    assert status == 404
    status, _ = await status_error(client.runs.wait(thread_id, "pipeline", input={}))
    assert status == 404
    status, _ = await status_error(collect(client.runs.stream(thread_id, "pipeline", input={})))
    assert status == 404
    # Nothing was created by the refused calls.
    status, _ = await status_error(client.runs.list(thread_id))
    assert status == 404


# --- after_seconds ------------------------------------------------------------------------------


async def test_after_seconds_delays_the_start(client: LangGraphClient) -> None:
    thread_id = await new_thread(client)
    started = time.monotonic()
    run = await client.runs.create(
        thread_id, "pipeline", input={"text": "a"}, after_seconds=2, if_not_exists="create"
    )
    assert run["status"] == "pending"
    await asyncio.sleep(0.5)
    assert (await client.runs.get(thread_id, run["run_id"]))["status"] == "pending"
    result = await client.runs.join(thread_id, run["run_id"])
    # Only a lower bound: the run must not have started before its delay.
    assert time.monotonic() - started >= 1.5
    assert result["steps"] == FULL
    assert (await client.runs.get(thread_id, run["run_id"]))["status"] == "success"


async def test_a_run_due_now_goes_before_a_scheduled_run_of_its_thread(
    client: LangGraphClient,
) -> None:
    # A thread's runs go by start time (LangGraph's order): the scheduled run starts once
    # it is due and the thread is free, after the run created later but due at once.
    thread_id = await new_thread(client)
    scheduled = await client.runs.create(
        thread_id,
        "slow",
        input=state(steps=["late"], seconds=0.01),
        after_seconds=1,
        if_not_exists="create",
    )
    follower = await client.runs.create(thread_id, "slow", input=state(steps=["next"]))
    result = await client.runs.join(thread_id, follower["run_id"])
    assert result["steps"] == ["next", "first", "second"]
    result = await client.runs.join(thread_id, scheduled["run_id"])
    assert result["steps"] == ["next", "first", "second", "late", "first", "second"]


# --- durability ---------------------------------------------------------------------------------


async def test_every_durability_mode_completes(client: LangGraphClient) -> None:
    modes: tuple[Durability, ...] = ("sync", "async", "exit")
    for durability in modes:
        thread_id = await new_thread(client)
        run = await client.runs.create(
            thread_id,
            "pipeline",
            input={"text": "a b"},
            durability=durability,
            if_not_exists="create",
        )
        assert kwargs_of(run)["durability"] == durability
        result = await client.runs.join(thread_id, run["run_id"])
        assert result["steps"] == FULL, durability
        # The final state is saved in every mode: the next run builds on it.
        again = await client.runs.wait(thread_id, "pipeline", input={"text": "a"})
        assert isinstance(again, dict)
        assert again["steps"] == FULL + FULL, durability


async def test_bad_durability_is_422(client: LangGraphClient) -> None:
    status, _ = await status_error(
        client.runs.create(None, "pipeline", durability="never")  # type: ignore[call-overload]
    )
    assert status == 422


# --- thread state (needs the threads API) -------------------------------------------------------


async def test_interrupt_before_leaves_the_thread_interrupted_with_next(
    client: LangGraphClient,
) -> None:
    thread_id = await new_thread(client)
    await client.runs.wait(
        thread_id,
        "pipeline",
        input={"text": "a b"},
        interrupt_before=["analyze"],
        if_not_exists="create",
    )
    thread = await client.threads.get(thread_id)
    assert thread["status"] == "interrupted"
    assert values_of(thread)["steps"] == ["tokenize"]
    state = await client.threads.get_state(thread_id)
    assert state["next"] == ["analyze"]
    await client.runs.wait(thread_id, "pipeline", input=None)
    assert (await client.threads.get(thread_id))["status"] == "idle"


async def test_durability_exit_saves_fewer_checkpoints_than_sync(client: LangGraphClient) -> None:
    counts: dict[str, Any] = {}
    compared: tuple[Durability, ...] = ("sync", "exit")
    for durability in compared:
        thread_id = await new_thread(client)
        await client.runs.wait(
            thread_id,
            "pipeline",
            input={"text": "a b"},
            durability=durability,
            if_not_exists="create",
        )
        counts[durability] = len(await client.threads.get_history(thread_id, limit=100))
    assert counts["exit"] < counts["sync"], counts


async def test_after_seconds_run_keeps_the_thread_busy_until_it_ends(
    client: LangGraphClient,
) -> None:
    thread_id = await new_thread(client)
    run = await client.runs.create(
        thread_id, "pipeline", input={"text": "a"}, after_seconds=1, if_not_exists="create"
    )
    assert (await client.threads.get(thread_id))["status"] == "busy"
    await client.runs.join(thread_id, run["run_id"])
    await wait_for_status(client, thread_id, run["run_id"], {"success"})
    assert (await client.threads.get(thread_id))["status"] == "idle"
