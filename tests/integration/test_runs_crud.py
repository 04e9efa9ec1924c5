"""Runs: create in the background, get, list (newest first, status filter, paging), delete."""

from __future__ import annotations

import uuid
from datetime import datetime

import httpx
from langgraph_sdk.client import LangGraphClient

from runyard.graphs.registry import default_assistant_id
from tests.support.runs import (
    RUN_KEYS,
    kwargs_of,
    metadata_of,
    new_tag,
    new_thread,
    status_error,
    wait_for_gone,
    wait_for_status,
)


def parse_time(value: str) -> datetime:
    """An ISO 8601 timestamp, which must carry a UTC offset."""
    parsed = datetime.fromisoformat(value)
    offset = parsed.utcoffset()
    assert offset is not None and offset.total_seconds() == 0, value
    return parsed


async def test_create_answers_a_pending_run_with_content_location(base_url: str) -> None:
    thread_id = str(uuid.uuid4())
    tag = new_tag()
    async with httpx.AsyncClient(base_url=base_url, timeout=30) as http:
        response = await http.post(
            f"/threads/{thread_id}/runs",
            json={
                "assistant_id": "pipeline",
                "input": {"text": "a bb ccc"},
                "metadata": tag,
                "if_not_exists": "create",
            },
        )
        assert response.status_code == 200, response.text
        run = response.json()
        assert set(run) >= RUN_KEYS
        assert response.headers["content-location"] == f"/threads/{thread_id}/runs/{run['run_id']}"
        assert run["thread_id"] == thread_id
        assert run["status"] in ("pending", "running")
        assert run["assistant_id"] == default_assistant_id("pipeline")
        assert run["metadata"]["test_tag"] == tag["test_tag"]
        assert run["metadata"]["assistant_id"] == run["assistant_id"]
        assert run["multitask_strategy"] == "enqueue"
        assert kwargs_of(run)["input"] == {"text": "a bb ccc"}
        assert kwargs_of(run)["stream_mode"] == ["values"]
        uuid.UUID(run["run_id"])
        created = parse_time(run["created_at"])
        assert parse_time(run["updated_at"]) >= created

        joined = (await http.get(f"/threads/{thread_id}/runs/{run['run_id']}/join")).json()
        assert joined["steps"] == ["tokenize", "analyze", "report"]
        assert joined["summary"] == "3 words, longest word: 'ccc'"
        finished = (await http.get(f"/threads/{thread_id}/runs/{run['run_id']}")).json()
        assert finished["status"] == "success"
        assert finished["run_id"] == run["run_id"]
        assert parse_time(finished["updated_at"]) >= parse_time(finished["created_at"])


async def test_sdk_create_then_get_and_join(client: LangGraphClient) -> None:
    thread_id = await new_thread(client)
    run = await client.runs.create(
        thread_id, "pipeline", input={"text": "one two"}, if_not_exists="create"
    )
    result = await client.runs.join(thread_id, run["run_id"])
    assert result["word_count"] == 2
    fetched = await client.runs.get(thread_id, run["run_id"])
    assert fetched["status"] == "success"
    assert fetched["thread_id"] == thread_id
    assert kwargs_of(fetched)["input"] == {"text": "one two"}


async def test_run_ids_are_new_for_every_run(client: LangGraphClient) -> None:
    thread_id = await new_thread(client)
    first = await client.runs.create(
        thread_id, "pipeline", input={"text": "a"}, if_not_exists="create"
    )
    second = await client.runs.create(thread_id, "pipeline", input={"text": "b"})
    assert first["run_id"] != second["run_id"]
    await client.runs.join(thread_id, second["run_id"])


async def test_list_is_newest_first_with_status_filter_and_paging(client: LangGraphClient) -> None:
    thread_id = await new_thread(client)
    first = await client.runs.create(
        thread_id, "pipeline", input={"text": "a"}, if_not_exists="create"
    )
    await client.runs.join(thread_id, first["run_id"])
    failed = await client.runs.create(thread_id, "fail", input={"value": 1})
    await client.runs.join(thread_id, failed["run_id"])
    last = await client.runs.create(thread_id, "pipeline", input={"text": "b"})
    await client.runs.join(thread_id, last["run_id"])

    listed = await client.runs.list(thread_id)
    assert [r["run_id"] for r in listed] == [last["run_id"], failed["run_id"], first["run_id"]]
    assert [r["status"] for r in listed] == ["success", "error", "success"]
    assert all(set(r) >= RUN_KEYS for r in listed)

    errors = await client.runs.list(thread_id, status="error")
    assert [r["run_id"] for r in errors] == [failed["run_id"]]
    successes = await client.runs.list(thread_id, status="success")
    assert [r["run_id"] for r in successes] == [last["run_id"], first["run_id"]]
    assert await client.runs.list(thread_id, status="pending") == []

    page = await client.runs.list(thread_id, limit=1, offset=1)
    assert [r["run_id"] for r in page] == [failed["run_id"]]
    assert await client.runs.list(thread_id, limit=2, offset=3) == []


async def test_list_shows_pending_and_running_runs(client: LangGraphClient) -> None:
    thread_id = await new_thread(client)
    slow = await client.runs.create(thread_id, "slow", input={"seconds": 1}, if_not_exists="create")
    queued = await client.runs.create(thread_id, "slow", input={"seconds": 0.1})
    await wait_for_status(client, thread_id, slow["run_id"], {"running"})
    running = await client.runs.list(thread_id, status="running")
    assert [r["run_id"] for r in running] == [slow["run_id"]]
    pending = await client.runs.list(thread_id, status="pending")
    assert [r["run_id"] for r in pending] == [queued["run_id"]]
    await client.runs.join(thread_id, queued["run_id"])


async def test_get_unknown_run_is_404(client: LangGraphClient) -> None:
    thread_id = await new_thread(client)
    run = await client.runs.create(
        thread_id, "pipeline", input={"text": "a"}, if_not_exists="create"
    )
    await client.runs.join(thread_id, run["run_id"])
    status, _ = await status_error(client.runs.get(thread_id, str(uuid.uuid4())))
    assert status == 404
    # A run is only found within its own thread.
    status, _ = await status_error(client.runs.get(str(uuid.uuid4()), run["run_id"]))
    assert status == 404


async def test_list_of_unknown_thread_is_404(client: LangGraphClient) -> None:
    status, detail = await status_error(client.runs.list(str(uuid.uuid4())))
    assert status == 404
    assert detail


async def test_delete_finished_run(client: LangGraphClient, base_url: str) -> None:
    thread_id = await new_thread(client)
    keep = await client.runs.create(
        thread_id, "pipeline", input={"text": "a"}, if_not_exists="create"
    )
    await client.runs.join(thread_id, keep["run_id"])
    doomed = await client.runs.create(thread_id, "pipeline", input={"text": "b"})
    await client.runs.join(thread_id, doomed["run_id"])
    async with httpx.AsyncClient(base_url=base_url) as http:
        response = await http.delete(f"/threads/{thread_id}/runs/{doomed['run_id']}")
        assert response.status_code == 204
        assert response.content == b""
        again = await http.delete(f"/threads/{thread_id}/runs/{doomed['run_id']}")
        assert again.status_code == 404
    status, _ = await status_error(client.runs.get(thread_id, doomed["run_id"]))
    assert status == 404
    assert [r["run_id"] for r in await client.runs.list(thread_id)] == [keep["run_id"]]


async def test_delete_running_run_stops_it_and_frees_the_thread(client: LangGraphClient) -> None:
    thread_id = await new_thread(client)
    run = await client.runs.create(thread_id, "slow", input={"seconds": 2}, if_not_exists="create")
    await wait_for_status(client, thread_id, run["run_id"], {"running"})
    await client.runs.delete(thread_id, run["run_id"])
    status, _ = await status_error(client.runs.get(thread_id, run["run_id"]))
    assert status == 404
    # The thread takes new work at once: nothing is left holding it.
    result = await client.runs.wait(thread_id, "slow", input={"seconds": 0.05})
    assert isinstance(result, dict)
    assert result["steps"][-2:] == ["first", "second"]
    assert [r["status"] for r in await client.runs.list(thread_id)] == ["success"]


async def test_delete_pending_run(client: LangGraphClient, base_url: str) -> None:
    thread_id = await new_thread(client)
    blocker = await client.runs.create(
        thread_id, "slow", input={"seconds": 0.5}, if_not_exists="create"
    )
    queued = await client.runs.create(thread_id, "slow", input={"seconds": 0.05})
    await client.runs.delete(thread_id, queued["run_id"])
    async with httpx.AsyncClient(base_url=base_url) as http:
        await wait_for_gone(http, f"/threads/{thread_id}/runs/{queued['run_id']}")
    await client.runs.join(thread_id, blocker["run_id"])
    assert [r["run_id"] for r in await client.runs.list(thread_id)] == [blocker["run_id"]]


async def test_run_on_a_created_assistant_uses_its_config(client: LangGraphClient) -> None:
    assistant = await client.assistants.create(
        "pipeline", config={"recursion_limit": 2}, metadata=new_tag()
    )
    thread_id = await new_thread(client)
    body = await client.runs.wait(
        thread_id,
        assistant["assistant_id"],
        input={"text": "a"},
        if_not_exists="create",
        raise_error=False,
    )
    assert isinstance(body, dict)
    assert body["__error__"]["error"] == "GraphRecursionError"
    (run,) = await client.runs.list(thread_id)
    assert run["assistant_id"] == assistant["assistant_id"]
    # The request's config overrides the assistant's.
    ok = await client.runs.wait(
        thread_id, assistant["assistant_id"], input={"text": "a"}, config={"recursion_limit": 25}
    )
    assert isinstance(ok, dict)
    assert ok["steps"][-3:] == ["tokenize", "analyze", "report"]


async def test_run_metadata_merges_assistant_thread_and_request(client: LangGraphClient) -> None:
    assistant = await client.assistants.create(
        "pipeline", metadata={"from_assistant": "a", "shared": "assistant"}
    )
    thread = await client.threads.create(metadata={"from_thread": "t", "shared": "thread"})
    run = await client.runs.create(
        thread["thread_id"],
        assistant["assistant_id"],
        input={"text": "a"},
        metadata={"from_request": "r", "shared": "request"},
    )
    await client.runs.join(thread["thread_id"], run["run_id"])
    metadata = metadata_of(run)
    assert metadata["assistant_id"] == assistant["assistant_id"]
    assert metadata["from_assistant"] == "a"
    assert metadata["from_request"] == "r"
    assert metadata["shared"] == "request"
    # LangGraph Platform also merges the thread's metadata into the run's.
    assert metadata["from_thread"] == "t"
