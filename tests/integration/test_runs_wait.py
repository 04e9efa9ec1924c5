"""Waiting for runs: /runs/wait, /join, and failing graphs reported readably."""

from __future__ import annotations

import asyncio
import uuid

import httpx
from langgraph_sdk.client import LangGraphClient

from runyard.services.run_waits import SAFETY_RECHECK_SECONDS
from tests.support.runs import (
    collect,
    metadata_of,
    names,
    new_thread,
    run_id_from,
    state,
    wait_for_status,
)

BOOM = {"error": "ValueError", "message": "boom: cannot process 'x'"}


async def test_wait_returns_final_values_with_join_headers(base_url: str) -> None:
    path = f"/threads/{uuid.uuid4()}"
    async with httpx.AsyncClient(base_url=base_url, timeout=60) as http:
        response = await http.post(
            f"{path}/runs/wait",
            json={"assistant_id": "pipeline", "input": {"text": "a bb"}, "if_not_exists": "create"},
        )
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("application/json")
        body = response.json()
        assert body["steps"] == ["tokenize", "analyze", "report"]
        assert body["summary"] == "2 words, longest word: 'bb'"
        run_id = run_id_from(response.headers["content-location"])
        assert response.headers["content-location"] == f"{path}/runs/{run_id}"
        assert response.headers["location"] == f"{path}/runs/{run_id}/join"
        run = (await http.get(f"{path}/runs/{run_id}")).json()
        assert run["status"] == "success"


async def test_sdk_wait_builds_on_the_thread_state(client: LangGraphClient) -> None:
    thread_id = await new_thread(client)
    first = await client.runs.wait(
        thread_id, "slow", input=state(seconds=0.01, steps=["a"]), if_not_exists="create"
    )
    second = await client.runs.wait(thread_id, "slow", input=state(steps=["b"]))
    assert isinstance(first, dict) and isinstance(second, dict)
    assert first["steps"] == ["a", "first", "second"]
    assert second["steps"] == ["a", "first", "second", "b", "first", "second"]


async def test_join_blocks_until_the_run_ends(client: LangGraphClient) -> None:
    thread_id = await new_thread(client)
    run = await client.runs.create(
        thread_id, "slow", input={"seconds": 0.5}, if_not_exists="create"
    )
    assert (await client.runs.get(thread_id, run["run_id"]))["status"] in ("pending", "running")
    result = await client.runs.join(thread_id, run["run_id"])
    assert result == {"seconds": 0.5, "steps": ["first", "second"]}
    # Joining answers only once the run is recorded as finished.
    assert (await client.runs.get(thread_id, run["run_id"]))["status"] == "success"


async def test_join_is_woken_by_the_run_ending_not_by_the_safety_recheck(
    client: LangGraphClient,
) -> None:
    thread_id = await new_thread(client)
    run = await client.runs.create(
        thread_id, "slow", input={"seconds": 0.5}, if_not_exists="create"
    )
    # The run ends about 1 s from now. A join that missed the completion signal would only
    # answer at its safety re-check, SAFETY_RECHECK_SECONDS after it started waiting.
    async with asyncio.timeout(SAFETY_RECHECK_SECONDS - 5):
        result = await client.runs.join(thread_id, run["run_id"])
    assert result["steps"] == ["first", "second"]


async def test_join_of_a_finished_run_answers_at_once(client: LangGraphClient) -> None:
    thread_id = await new_thread(client)
    run = await client.runs.create(
        thread_id, "pipeline", input={"text": "a"}, if_not_exists="create"
    )
    first = await client.runs.join(thread_id, run["run_id"])
    again = await asyncio.wait_for(client.runs.join(thread_id, run["run_id"]), timeout=5)
    assert first == again
    assert again["steps"] == ["tokenize", "analyze", "report"]


async def test_many_joiners_all_get_the_result(client: LangGraphClient) -> None:
    thread_id = await new_thread(client)
    run = await client.runs.create(
        thread_id, "slow", input={"seconds": 0.3}, if_not_exists="create"
    )
    results = await asyncio.gather(*(client.runs.join(thread_id, run["run_id"]) for _ in range(5)))
    assert all(r == {"seconds": 0.3, "steps": ["first", "second"]} for r in results)


async def test_failing_graph_is_reported_in_wait_join_and_run(client: LangGraphClient) -> None:
    thread_id = await new_thread(client)
    body = await client.runs.wait(
        thread_id, "fail", input={"value": "x"}, if_not_exists="create", raise_error=False
    )
    assert body == {"__error__": BOOM}
    (run,) = await client.runs.list(thread_id)
    assert run["status"] == "error"
    assert await client.runs.join(thread_id, run["run_id"]) == {"__error__": BOOM}


async def test_failing_background_run_ends_in_error(client: LangGraphClient) -> None:
    thread_id = await new_thread(client)
    run = await client.runs.create(thread_id, "fail", input={"value": "x"}, if_not_exists="create")
    assert await client.runs.join(thread_id, run["run_id"]) == {"__error__": BOOM}
    finished = await wait_for_status(client, thread_id, run["run_id"], {"error"}, timeout=5)
    assert finished["status"] == "error"


async def test_sdk_wait_raises_the_graph_error(client: LangGraphClient) -> None:
    thread_id = await new_thread(client)
    try:
        await client.runs.wait(thread_id, "fail", input={"value": "x"}, if_not_exists="create")
    except Exception as exc:
        assert "ValueError" in str(exc)
        assert "boom: cannot process 'x'" in str(exc)
    else:
        raise AssertionError("wait on a failing graph did not raise")


async def test_a_thread_runs_again_after_a_failure(client: LangGraphClient) -> None:
    thread_id = await new_thread(client)
    await client.runs.wait(
        thread_id, "fail", input={"value": "x"}, if_not_exists="create", raise_error=False
    )
    parts = await collect(client.runs.stream(thread_id, "pipeline", input={"text": "a"}))
    assert names(parts)[-1] == "values"
    assert [r["status"] for r in await client.runs.list(thread_id)] == ["success", "error"]


async def test_wait_and_join_on_a_cancelled_run(client: LangGraphClient) -> None:
    thread_id = await new_thread(client)
    run = await client.runs.create(thread_id, "slow", input={"seconds": 2}, if_not_exists="create")
    join = asyncio.create_task(client.runs.join(thread_id, run["run_id"]))
    await wait_for_status(client, thread_id, run["run_id"], {"running"})
    await client.runs.cancel(thread_id, run["run_id"])
    result = await asyncio.wait_for(join, timeout=10)
    assert "__error__" not in result
    assert result.get("steps", []) == []


# --- thread state (needs the threads API) -------------------------------------------------------


async def test_failed_run_leaves_the_thread_in_error(client: LangGraphClient) -> None:
    thread_id = await new_thread(client)
    await client.runs.wait(
        thread_id, "fail", input={"value": "x"}, if_not_exists="create", raise_error=False
    )
    thread = await client.threads.get(thread_id)
    assert thread["status"] == "error"
    assert thread.get("error") == BOOM  # type: ignore[comparison-overlap]
    assert thread["values"] == {"value": "x", "seen": ["echo"]}


async def test_successful_run_leaves_the_thread_idle_with_values(client: LangGraphClient) -> None:
    thread_id = await new_thread(client)
    run = await client.runs.create(
        thread_id, "slow", input={"seconds": 0.5}, if_not_exists="create"
    )
    await wait_for_status(client, thread_id, run["run_id"], {"running"})
    assert (await client.threads.get(thread_id))["status"] == "busy"
    await client.runs.join(thread_id, run["run_id"])
    thread = await client.threads.get(thread_id)
    assert thread["status"] == "idle"
    assert thread["values"] == {"seconds": 0.5, "steps": ["first", "second"]}
    assert metadata_of(thread)["graph_id"] == "slow"
