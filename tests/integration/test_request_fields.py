"""Request fields LangGraph Platform honours: select on runs, state and history,
checkpoint_during, the tools and lifecycle stream modes, delete_threads on assistant delete,
context under thread select, and sorting threads by state_updated_at."""

from __future__ import annotations

import httpx
from langgraph_sdk.client import LangGraphClient

from tests.support.runs import (
    collect,
    data_of,
    kwargs_of,
    new_tag,
    new_thread,
    state,
    status_error,
    wait_for_status,
)

FULL = ["tokenize", "analyze", "report"]


# --- select ------------------------------------------------------------------------------------


async def test_runs_list_returns_only_the_selected_fields(client: LangGraphClient) -> None:
    thread_id = await new_thread(client)
    await client.runs.wait(thread_id, "pipeline", input={"text": "a b"})
    listed = await client.runs.list(thread_id, select=["run_id", "status"])
    assert [set(run) for run in listed] == [{"run_id", "status"}]
    assert listed[0]["status"] == "success"


async def test_runs_list_refuses_an_unknown_field(client: LangGraphClient) -> None:
    thread_id = await new_thread(client)
    status, detail = await status_error(
        client.runs.list(thread_id, select=["run_id", "colour"])  # type: ignore[list-item]
    )
    assert status == 422
    assert "colour" in detail or "select" in detail


async def test_state_select_keeps_the_chosen_fields_and_keys(client: LangGraphClient) -> None:
    thread_id = await new_thread(client)
    await client.runs.wait(thread_id, "pipeline", input={"text": "a b"})
    picked = await client.threads.get_state(thread_id, select=["values.steps", "next"])
    assert picked == {"values": {"steps": FULL}, "next": []}
    full = await client.threads.get_state(thread_id)
    checkpoint = full["checkpoint"]
    at = await client.threads.get_state(thread_id, checkpoint=checkpoint, select=["checkpoint"])
    assert at == {"checkpoint": checkpoint}
    by_id = await client.threads.get_state(
        thread_id, checkpoint_id=checkpoint["checkpoint_id"], select=["metadata"]
    )
    assert set(by_id) == {"metadata"}


async def test_history_select_applies_to_every_state(client: LangGraphClient) -> None:
    thread_id = await new_thread(client)
    await client.runs.wait(thread_id, "pipeline", input={"text": "a b"})
    history = await client.threads.get_history(thread_id, select=["values.word_count", "next"])
    assert len(history) >= 4
    assert all(set(item) == {"values", "next"} for item in history)
    assert history[0]["values"] == {"word_count": 2}
    assert all(set(item["values"]) <= {"word_count"} for item in history)


async def test_state_select_refuses_an_unknown_field(client: LangGraphClient) -> None:
    thread_id = await new_thread(client)
    status, detail = await status_error(client.threads.get_state(thread_id, select=["colour"]))
    assert status == 422
    assert "select" in detail and "values" in detail


# --- checkpoint_during ---------------------------------------------------------------------------


async def test_checkpoint_during_false_saves_only_the_end(
    client: LangGraphClient, base_url: str
) -> None:
    """The deprecated flag means durability exit (False) or async (True), as on the Platform."""
    histories = {}
    async with httpx.AsyncClient(base_url=base_url, timeout=30) as http:
        for flag in (True, False):
            thread_id = await new_thread(client)
            body = {
                "assistant_id": "pipeline",
                "input": {"text": "a b"},
                "checkpoint_during": flag,
            }
            response = await http.post(f"/threads/{thread_id}/runs", json=body)
            assert response.status_code == 200, response.text
            run = response.json()
            assert kwargs_of(run)["durability"] == ("async" if flag else "exit")
            result = await client.runs.join(thread_id, run["run_id"])
            assert result["steps"] == FULL
            histories[flag] = await client.threads.get_history(thread_id, limit=100)
    assert len(histories[False]) < len(histories[True])
    assert histories[False][0]["values"]["steps"] == FULL


async def test_durability_wins_over_checkpoint_during(
    client: LangGraphClient, base_url: str
) -> None:
    body = {
        "assistant_id": "pipeline",
        "input": {"text": "a"},
        "durability": "sync",
        "checkpoint_during": False,
    }
    async with httpx.AsyncClient(base_url=base_url, timeout=30) as http:
        response = await http.post("/runs", json=body)
    assert response.status_code == 200, response.text
    assert kwargs_of(response.json())["durability"] == "sync"


async def test_cron_checkpoint_during_becomes_its_runs_durability(
    client: LangGraphClient, base_url: str
) -> None:
    thread_id = await new_thread(client)
    body = {
        "assistant_id": "pipeline",
        "schedule": "0 0 1 1 *",
        "input": {"text": "a"},
        "checkpoint_during": False,
    }
    async with httpx.AsyncClient(base_url=base_url, timeout=30) as http:
        response = await http.post(f"/threads/{thread_id}/runs/crons", json=body)
        assert response.status_code == 200, response.text
        cron = response.json()
        try:
            assert cron["payload"]["durability"] == "exit"
            patched = await http.patch(
                f"/runs/crons/{cron['cron_id']}", json={"checkpoint_during": True}
            )
            assert patched.status_code == 200, patched.text
            assert patched.json()["payload"]["durability"] == "async"
        finally:
            await http.delete(f"/runs/crons/{cron['cron_id']}")


# --- tools and lifecycle stream modes ---------------------------------------------------------


async def test_tools_stream_mode_reports_tool_calls(client: LangGraphClient) -> None:
    parts = await collect(
        client.runs.stream(None, "tools", input={"number": 21}, stream_mode=["tools", "values"])
    )
    tools = data_of(parts, "tools")
    assert [event["event"] for event in tools] == ["tool-started", "tool-finished"]
    assert tools[0]["tool_name"] == "double"
    assert tools[0]["input"] == {"number": 21}
    assert tools[1]["output"] == 42
    assert tools[0]["tool_call_id"] == tools[1]["tool_call_id"]
    assert data_of(parts, "values")[-1]["result"] == 42


async def test_lifecycle_stream_mode_is_accepted(client: LangGraphClient) -> None:
    thread_id = await new_thread(client)
    parts = await collect(
        client.runs.stream(
            thread_id, "pipeline", input={"text": "a"}, stream_mode=["lifecycle", "values"]
        )
    )
    assert parts[0].event == "metadata"
    assert data_of(parts, "values")[-1]["steps"] == FULL
    run = (await client.runs.list(thread_id))[0]
    assert kwargs_of(run)["stream_mode"] == ["lifecycle", "values"]


# --- delete_threads ------------------------------------------------------------------------------


async def test_assistant_delete_with_threads_removes_its_threads(client: LangGraphClient) -> None:
    assistant = await client.assistants.create("pipeline", name="doomed")
    other = await client.assistants.create("pipeline", name="kept")
    doomed = []
    for _ in range(2):
        thread_id = await new_thread(client)
        await client.runs.wait(thread_id, assistant["assistant_id"], input={"text": "a"})
        doomed.append(thread_id)
    kept = await new_thread(client)
    await client.runs.wait(kept, other["assistant_id"], input={"text": "a"})
    busy = await new_thread(client)
    slow = await client.assistants.create("slow", name="slow-doomed")
    running = await client.runs.create(busy, slow["assistant_id"], input=state(seconds=30))
    await wait_for_status(client, busy, running["run_id"], {"running"})

    await client.assistants.delete(assistant["assistant_id"], delete_threads=True)
    await client.assistants.delete(slow["assistant_id"], delete_threads=True)

    for thread_id in [*doomed, busy]:
        status, _ = await status_error(client.threads.get(thread_id))
        assert status == 404
    assert (await client.threads.get(kept))["thread_id"] == kept
    status, _ = await status_error(client.assistants.get(assistant["assistant_id"]))
    assert status == 404
    await client.assistants.delete(other["assistant_id"])


async def test_assistant_delete_keeps_threads_by_default(client: LangGraphClient) -> None:
    assistant = await client.assistants.create("pipeline", name="plain")
    thread_id = await new_thread(client)
    await client.runs.wait(thread_id, assistant["assistant_id"], input={"text": "a"})
    await client.assistants.delete(assistant["assistant_id"])
    assert (await client.threads.get(thread_id))["thread_id"] == thread_id


async def test_assistant_delete_with_threads_of_a_missing_assistant_is_404(
    client: LangGraphClient,
) -> None:
    status, _ = await status_error(
        client.assistants.delete("00000000-0000-0000-0000-000000000001", delete_threads=True)
    )
    assert status == 404


# --- thread select context, sort by state_updated_at -------------------------------------------


async def test_thread_select_context_is_the_latest_runs_context(client: LangGraphClient) -> None:
    tag = new_tag()
    thread = await client.threads.create(metadata=tag)
    thread_id = thread["thread_id"]
    await client.runs.wait(thread_id, "pipeline", input={"text": "a"}, context={"tone": "dry"})
    found = await client.threads.search(metadata=tag, select=["thread_id", "context"])
    assert found == [{"thread_id": thread_id, "context": {"tone": "dry"}}]
    await client.runs.wait(thread_id, "pipeline", input={"text": "a"}, context={"tone": "warm"})
    found = await client.threads.search(metadata=tag, select=["context"])
    assert found == [{"context": {"tone": "warm"}}]
    # Not part of a thread's default shape, as on LangGraph Platform.
    assert "context" not in (await client.threads.search(metadata=tag))[0]


async def test_threads_sort_by_state_updated_at(client: LangGraphClient) -> None:
    tag = new_tag()
    first = (await client.threads.create(metadata=tag))["thread_id"]
    second = (await client.threads.create(metadata=tag))["thread_id"]
    await client.runs.wait(first, "pipeline", input={"text": "a"})
    # A metadata edit moves updated_at but not state_updated_at.
    await client.threads.update(second, metadata={"note": "edited"})
    by_state = await client.threads.search(
        metadata=tag, sort_by="state_updated_at", sort_order="desc"
    )
    assert [t["thread_id"] for t in by_state] == [first, second]
    by_update = await client.threads.search(metadata=tag, sort_by="updated_at", sort_order="desc")
    assert [t["thread_id"] for t in by_update] == [second, first]
    edited = await client.threads.get(second)
    assert edited["state_updated_at"] < edited["updated_at"]  # type: ignore[typeddict-item]
