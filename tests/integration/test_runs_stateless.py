"""Stateless runs (POST /runs, /runs/stream, /runs/wait) on temporary threads."""

from __future__ import annotations

from typing import Any

import httpx
from langgraph_sdk.client import LangGraphClient

from tests.support.runs import (
    collect,
    data_of,
    kwargs_of,
    metadata_of,
    names,
    new_tag,
    run_id_from,
    status_error,
    thread_id_from,
    values_of,
    wait_for_gone,
)

FULL = ["tokenize", "analyze", "report"]


async def test_wait_returns_values_and_deletes_the_temporary_thread(base_url: str) -> None:
    async with httpx.AsyncClient(base_url=base_url, timeout=60) as http:
        response = await http.post(
            "/runs/wait", json={"assistant_id": "pipeline", "input": {"text": "a b"}}
        )
        assert response.status_code == 200
        assert response.json()["steps"] == FULL
        location = response.headers["content-location"]
        run_id = run_id_from(location)
        assert response.headers["location"].endswith(f"/runs/{run_id}/join")
        thread_id = thread_id_from(location)
        assert thread_id
        await wait_for_gone(http, f"/threads/{thread_id}/runs/{run_id}")
        await wait_for_gone(http, f"/threads/{thread_id}")


async def test_sdk_wait_without_thread(client: LangGraphClient) -> None:
    result = await client.runs.wait(None, "pipeline", input={"text": "x"})
    assert isinstance(result, dict)
    assert result["steps"] == FULL
    # Each stateless run starts from scratch.
    again = await client.runs.wait(None, "pipeline", input={"text": "x"})
    assert again == result


async def _slow_stateless_run(http: httpx.AsyncClient, seconds: float) -> httpx.Response:
    """POST /runs of the `slow` graph, which must be accepted."""
    response = await http.post(
        "/runs", json={"assistant_id": "slow", "input": {"seconds": seconds}, "metadata": new_tag()}
    )
    assert response.status_code == 200, response.text
    return response


async def test_background_run_is_temporary_and_deleted_by_default(base_url: str) -> None:
    async with httpx.AsyncClient(base_url=base_url, timeout=60) as http:
        response = await _slow_stateless_run(http, 0.2)
        run = response.json()
        assert kwargs_of(run)["temporary"] is True
        assert run["status"] in ("pending", "running")
        assert run["thread_id"]
        assert response.headers["content-location"] == f"/runs/{run['run_id']}"
        await wait_for_gone(http, f"/threads/{run['thread_id']}/runs/{run['run_id']}")
        assert (await http.get(f"/threads/{run['thread_id']}/runs")).status_code == 404


async def test_a_run_is_refused_on_the_thread_a_stateless_run_deletes(base_url: str) -> None:
    async with httpx.AsyncClient(base_url=base_url, timeout=60) as http:
        stateless = (await _slow_stateless_run(http, 0.5)).json()
        thread_id = stateless["thread_id"]
        for extra in ({"multitask_strategy": "enqueue"}, {"if_not_exists": "create"}):
            refused = await http.post(
                f"/threads/{thread_id}/runs",
                json={"assistant_id": "slow", "input": {"seconds": 0}, **extra},
            )
            # Accepting it would lose it: the thread goes, with its runs, when the first ends.
            assert refused.status_code == 409, refused.text
            assert "temporary thread of a stateless run" in refused.json()["detail"]
        runs = (await http.get(f"/threads/{thread_id}/runs")).json()
        assert [run["run_id"] for run in runs] == [stateless["run_id"]]
        await wait_for_gone(http, f"/threads/{thread_id}")


async def test_on_completion_keep_keeps_the_thread_and_run(client: LangGraphClient) -> None:
    run = await client.runs.create(None, "pipeline", input={"text": "a b"}, on_completion="keep")
    thread_id = run["thread_id"]
    result = await client.runs.join(thread_id, run["run_id"])
    assert result["steps"] == FULL
    fetched = await client.runs.get(thread_id, run["run_id"])
    assert fetched["status"] == "success"
    # The kept thread is a normal thread: it takes further runs and keeps its state.
    again = await client.runs.wait(thread_id, "pipeline", input={"text": "a b"})
    assert isinstance(again, dict)
    assert again["steps"] == FULL + FULL


async def test_on_completion_delete_explicitly(client: LangGraphClient, base_url: str) -> None:
    run = await client.runs.create(None, "pipeline", input={"text": "a"}, on_completion="delete")
    async with httpx.AsyncClient(base_url=base_url) as http:
        await wait_for_gone(http, f"/threads/{run['thread_id']}/runs/{run['run_id']}")


async def test_stream_without_thread(client: LangGraphClient) -> None:
    parts = await collect(
        client.runs.stream(
            None, "pipeline", input={"text": "a b"}, stream_mode=["updates", "custom"]
        )
    )
    assert names(parts) == ["metadata", *(["custom", "updates"] * 3)]
    assert [list(u) for u in data_of(parts, "updates")] == [[n] for n in FULL]


async def test_stream_with_keep_leaves_a_usable_thread(client: LangGraphClient) -> None:
    created: list[Any] = []
    parts = await collect(
        client.runs.stream(
            None,
            "pipeline",
            input={"text": "a b"},
            on_completion="keep",
            on_run_created=created.append,
        )
    )
    run_id = parts[0].data["run_id"]
    (meta,) = created
    assert meta["run_id"] == run_id
    thread_id = meta["thread_id"]
    assert thread_id
    run = await client.runs.get(thread_id, run_id)
    assert run["status"] == "success"


async def test_stateless_failure_is_reported(client: LangGraphClient) -> None:
    body = await client.runs.wait(None, "fail", input={"value": "x"}, raise_error=False)
    assert body == {"__error__": {"error": "ValueError", "message": "boom: cannot process 'x'"}}
    parts = await collect(client.runs.stream(None, "fail", input={"value": "x"}))
    assert names(parts)[-1] == "error"


async def test_stateless_interrupt_is_reported(client: LangGraphClient) -> None:
    body = await client.runs.wait(None, "asker", input={"value": 1})
    assert isinstance(body, dict)
    assert body["__interrupt__"][0]["value"] == {"question": "continue?", "value": 1}


async def test_resume_needs_a_thread(client: LangGraphClient) -> None:
    status, detail = await status_error(client.runs.wait(None, "asker", command={"resume": "yes"}))
    assert status in (400, 422)
    assert "thread" in detail.lower()


# --- thread state (needs the threads API) -------------------------------------------------------


async def test_kept_thread_has_values_and_graph_metadata(client: LangGraphClient) -> None:
    run = await client.runs.create(None, "pipeline", input={"text": "a b"}, on_completion="keep")
    await client.runs.join(run["thread_id"], run["run_id"])
    thread = await client.threads.get(run["thread_id"])
    assert thread["status"] == "idle"
    assert values_of(thread)["steps"] == FULL
    assert metadata_of(thread)["graph_id"] == "pipeline"


async def test_deleted_temporary_thread_is_gone_from_the_threads_api(
    client: LangGraphClient, base_url: str
) -> None:
    run = await client.runs.create(None, "pipeline", input={"text": "a"})
    async with httpx.AsyncClient(base_url=base_url) as http:
        await wait_for_gone(http, f"/threads/{run['thread_id']}/runs/{run['run_id']}")
    status, _ = await status_error(client.threads.get(run["thread_id"]))
    assert status == 404
    # The threads API must have answered for real (not a missing route).
    assert (await client.threads.create())["thread_id"]
