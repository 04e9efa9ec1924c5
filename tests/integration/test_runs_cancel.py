"""Cancelling runs (interrupt, rollback, wait, bulk) and multitask strategies on busy threads."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import httpx
from langgraph_sdk.client import LangGraphClient

from tests.support.runs import (
    TERMINAL,
    collect,
    data_of,
    new_thread,
    state,
    status_error,
    wait_for_gone,
    wait_for_status,
)


async def start_slow(client: LangGraphClient, seconds: float = 2.0) -> tuple[str, dict[str, Any]]:
    """A slow run on a new thread, already executing."""
    thread_id = await new_thread(client)
    run = await client.runs.create(
        thread_id, "slow", input={"seconds": seconds}, if_not_exists="create"
    )
    await wait_for_status(client, thread_id, run["run_id"], {"running"})
    return thread_id, dict(run)


# --- cancel ---------------------------------------------------------------------------------


async def test_cancel_a_running_run_ends_it_interrupted(
    client: LangGraphClient, base_url: str
) -> None:
    thread_id, run = await start_slow(client)
    async with httpx.AsyncClient(base_url=base_url) as http:
        response = await http.post(f"/threads/{thread_id}/runs/{run['run_id']}/cancel")
    assert response.status_code == 202
    # LangGraph answers an empty 202; Runyard says what it did (delivered or only recorded).
    assert response.json()["delivered"] is True
    # Generous bound: the status is what matters, not the speed.
    finished = await wait_for_status(client, thread_id, run["run_id"], TERMINAL, timeout=5)
    assert finished["status"] == "interrupted"


async def test_cancel_with_wait_answers_once_the_run_stopped(client: LangGraphClient) -> None:
    thread_id, run = await start_slow(client)
    await client.runs.cancel(thread_id, run["run_id"], wait=True)
    assert (await client.runs.get(thread_id, run["run_id"]))["status"] == "interrupted"


async def test_cancel_with_wait_returns_the_join_body(
    base_url: str, client: LangGraphClient
) -> None:
    thread_id, run = await start_slow(client)
    async with httpx.AsyncClient(base_url=base_url, timeout=30) as http:
        response = await http.post(
            f"/threads/{thread_id}/runs/{run['run_id']}/cancel", params={"wait": 1}
        )
    assert response.status_code == 200
    body = response.json()
    assert isinstance(body, dict)
    assert "__error__" not in body


async def test_cancel_rollback_deletes_the_run(client: LangGraphClient, base_url: str) -> None:
    thread_id, run = await start_slow(client)
    await client.runs.cancel(thread_id, run["run_id"], action="rollback")
    async with httpx.AsyncClient(base_url=base_url) as http:
        await wait_for_gone(http, f"/threads/{thread_id}/runs/{run['run_id']}")
    # The thread is free again.
    result = await client.runs.wait(thread_id, "slow", input={"seconds": 0.01})
    assert isinstance(result, dict)
    assert result["steps"] == ["first", "second"]


async def test_cancel_rollback_with_wait_answers_once_the_run_is_gone(
    client: LangGraphClient,
) -> None:
    thread_id, run = await start_slow(client)
    await client.runs.cancel(thread_id, run["run_id"], wait=True, action="rollback")
    status, _ = await status_error(client.runs.get(thread_id, run["run_id"]))
    assert status == 404


async def test_cancel_rollback_undoes_the_checkpoints_of_the_run(client: LangGraphClient) -> None:
    thread_id = await new_thread(client)
    await client.runs.wait(
        thread_id, "slow", input=state(seconds=0.01, steps=["kept"]), if_not_exists="create"
    )
    run = await client.runs.create(thread_id, "slow", input=state(seconds=1, steps=["dropped"]))
    await wait_for_status(client, thread_id, run["run_id"], {"running"})
    await client.runs.cancel(thread_id, run["run_id"], action="rollback")
    result = await client.runs.wait(thread_id, "slow", input={"seconds": 0.01})
    assert isinstance(result, dict)
    assert "dropped" not in result["steps"]
    assert result["steps"] == ["kept", "first", "second", "first", "second"]


async def test_cancel_a_pending_run(client: LangGraphClient) -> None:
    thread_id, blocker = await start_slow(client, seconds=0.5)
    queued = await client.runs.create(thread_id, "slow", input={"seconds": 0.01})
    await client.runs.cancel(thread_id, queued["run_id"])
    assert (await client.runs.get(thread_id, queued["run_id"]))["status"] == "interrupted"
    await client.runs.join(thread_id, blocker["run_id"])
    assert (await client.runs.get(thread_id, blocker["run_id"]))["status"] == "success"
    # The cancelled run never executes later.
    await asyncio.sleep(0.3)
    assert (await client.runs.get(thread_id, queued["run_id"]))["status"] == "interrupted"


async def test_cancel_a_finished_run_is_refused(client: LangGraphClient) -> None:
    thread_id = await new_thread(client)
    run = await client.runs.create(
        thread_id, "pipeline", input={"text": "a"}, if_not_exists="create"
    )
    await client.runs.join(thread_id, run["run_id"])
    # LangGraph answers 404 ("no matching runs"); a 409 says the same thing more precisely.
    status, detail = await status_error(client.runs.cancel(thread_id, run["run_id"]))
    assert status in (404, 409)
    assert detail
    assert (await client.runs.get(thread_id, run["run_id"]))["status"] == "success"


async def test_cancel_an_unknown_run_is_404(client: LangGraphClient) -> None:
    thread_id = await new_thread(client)
    await client.runs.wait(thread_id, "pipeline", input={"text": "a"}, if_not_exists="create")
    status, _ = await status_error(client.runs.cancel(thread_id, str(uuid.uuid4())))
    assert status == 404


async def test_cancel_many_by_thread_and_run_ids(client: LangGraphClient) -> None:
    thread_id, first = await start_slow(client)
    second = await client.runs.create(thread_id, "slow", input={"seconds": 2})
    await client.runs.cancel_many(thread_id=thread_id, run_ids=[first["run_id"], second["run_id"]])
    for run in (first, second):
        finished = await wait_for_status(client, thread_id, run["run_id"], TERMINAL, timeout=5)
        assert finished["status"] == "interrupted"


async def test_cancel_many_by_status_pending(client: LangGraphClient) -> None:
    thread_id = await new_thread(client)
    scheduled = await client.runs.create(
        thread_id, "slow", input={"seconds": 0.01}, after_seconds=60, if_not_exists="create"
    )
    await client.runs.cancel_many(status="pending")
    assert (await client.runs.get(thread_id, scheduled["run_id"]))["status"] == "interrupted"


async def test_cancel_many_with_rollback_deletes(client: LangGraphClient, base_url: str) -> None:
    thread_id, run = await start_slow(client)
    await client.runs.cancel_many(thread_id=thread_id, run_ids=[run["run_id"]], action="rollback")
    async with httpx.AsyncClient(base_url=base_url) as http:
        await wait_for_gone(http, f"/threads/{thread_id}/runs/{run['run_id']}")


async def test_cancel_many_needs_a_selection(base_url: str) -> None:
    async with httpx.AsyncClient(base_url=base_url) as http:
        response = await http.post("/runs/cancel", json={})
    assert response.status_code == 422
    assert response.json()["detail"]


# --- multitask strategies ---------------------------------------------------------------------


async def test_reject_refuses_a_second_run_with_409(client: LangGraphClient) -> None:
    thread_id, run = await start_slow(client, seconds=0.5)
    status, detail = await status_error(
        client.runs.create(thread_id, "slow", input={}, multitask_strategy="reject")
    )
    assert status == 409
    assert detail
    status, _ = await status_error(
        client.runs.wait(thread_id, "slow", input={}, multitask_strategy="reject")
    )
    assert status == 409
    status, _ = await status_error(
        collect(client.runs.stream(thread_id, "slow", input={}, multitask_strategy="reject"))
    )
    assert status == 409
    # The running run is untouched and no other run was recorded.
    await client.runs.join(thread_id, run["run_id"])
    runs = await client.runs.list(thread_id)
    assert [r["run_id"] for r in runs] == [run["run_id"]]
    assert runs[0]["status"] == "success"


async def test_reject_accepts_a_run_on_an_idle_thread(client: LangGraphClient) -> None:
    thread_id = await new_thread(client)
    await client.runs.wait(thread_id, "pipeline", input={"text": "a"}, if_not_exists="create")
    result = await client.runs.wait(
        thread_id, "pipeline", input={"text": "a"}, multitask_strategy="reject"
    )
    assert isinstance(result, dict)
    run = (await client.runs.list(thread_id))[0]
    assert run["multitask_strategy"] == "reject"


async def test_enqueue_runs_in_order(client: LangGraphClient) -> None:
    thread_id = await new_thread(client)
    first = await client.runs.create(
        thread_id, "slow", input=state(seconds=0.3, steps=["r1"]), if_not_exists="create"
    )
    second = await client.runs.create(
        thread_id, "slow", input=state(seconds=0.05, steps=["r2"]), multitask_strategy="enqueue"
    )
    third = await client.runs.create(thread_id, "slow", input=state(steps=["r3"]))
    await wait_for_status(client, thread_id, first["run_id"], {"running"})
    assert (await client.runs.get(thread_id, second["run_id"]))["status"] == "pending"
    result = await client.runs.join(thread_id, third["run_id"])
    assert result["steps"] == [
        "r1", "first", "second",
        "r2", "first", "second",
        "r3", "first", "second",
    ]  # fmt: skip
    statuses = [r["status"] for r in await client.runs.list(thread_id)]
    assert statuses == ["success", "success", "success"]


async def test_interrupt_stops_the_old_run_and_starts_the_new(client: LangGraphClient) -> None:
    thread_id, old = await start_slow(client)
    new = await client.runs.create(
        thread_id, "slow", input=state(seconds=0.05, steps=["new"]), multitask_strategy="interrupt"
    )
    result = await client.runs.join(thread_id, new["run_id"])
    assert result["steps"][-3:] == ["new", "first", "second"]
    assert (await client.runs.get(thread_id, new["run_id"]))["status"] == "success"
    stopped = await wait_for_status(client, thread_id, old["run_id"], TERMINAL, timeout=5)
    assert stopped["status"] == "interrupted"


async def test_interrupt_also_ends_pending_runs(client: LangGraphClient) -> None:
    thread_id, old = await start_slow(client)
    queued = await client.runs.create(thread_id, "slow", input={"seconds": 2})
    new = await client.runs.create(
        thread_id, "slow", input={"seconds": 0.05}, multitask_strategy="interrupt"
    )
    await client.runs.join(thread_id, new["run_id"])
    for run in (old, queued):
        ended = await wait_for_status(client, thread_id, run["run_id"], TERMINAL, timeout=5)
        assert ended["status"] == "interrupted"


async def test_interrupt_through_stream(client: LangGraphClient) -> None:
    thread_id, old = await start_slow(client)
    parts = await collect(
        client.runs.stream(
            thread_id, "slow", input={"seconds": 0.05}, multitask_strategy="interrupt"
        )
    )
    assert data_of(parts, "values")[-1]["steps"][-2:] == ["first", "second"]
    stopped = await wait_for_status(client, thread_id, old["run_id"], TERMINAL, timeout=5)
    assert stopped["status"] == "interrupted"


async def test_rollback_deletes_the_old_run(client: LangGraphClient, base_url: str) -> None:
    thread_id, old = await start_slow(client)
    queued = await client.runs.create(thread_id, "slow", input={"seconds": 2})
    new = await client.runs.create(
        thread_id, "slow", input=state(seconds=0.05, steps=["new"]), multitask_strategy="rollback"
    )
    result = await client.runs.join(thread_id, new["run_id"])
    assert result["steps"][-3:] == ["new", "first", "second"]
    async with httpx.AsyncClient(base_url=base_url) as http:
        for run in (old, queued):
            await wait_for_gone(http, f"/threads/{thread_id}/runs/{run['run_id']}")
    assert [r["run_id"] for r in await client.runs.list(thread_id)] == [new["run_id"]]


async def test_rollback_through_wait(client: LangGraphClient, base_url: str) -> None:
    thread_id, old = await start_slow(client)
    result = await client.runs.wait(
        thread_id, "slow", input={"seconds": 0.05}, multitask_strategy="rollback"
    )
    assert isinstance(result, dict)
    assert result["steps"][-2:] == ["first", "second"]
    async with httpx.AsyncClient(base_url=base_url) as http:
        await wait_for_gone(http, f"/threads/{thread_id}/runs/{old['run_id']}")


# --- thread state (needs the threads API) -------------------------------------------------------


async def test_cancelled_running_run_leaves_the_thread_interrupted_or_idle(
    client: LangGraphClient,
) -> None:
    thread_id, run = await start_slow(client)
    await client.runs.cancel(thread_id, run["run_id"], wait=True)
    thread = await client.threads.get(thread_id)
    assert thread["status"] in ("interrupted", "idle")
    assert thread["status"] != "busy"


async def test_cancelled_pending_run_leaves_the_thread_idle(client: LangGraphClient) -> None:
    thread_id = await new_thread(client)
    run = await client.runs.create(
        thread_id, "slow", input={"seconds": 0.01}, after_seconds=60, if_not_exists="create"
    )
    assert (await client.threads.get(thread_id))["status"] == "busy"
    await client.runs.cancel(thread_id, run["run_id"])
    assert (await client.threads.get(thread_id))["status"] == "idle"


async def test_rolled_back_running_run_does_not_leave_the_thread_busy(
    client: LangGraphClient,
) -> None:
    thread_id, run = await start_slow(client)
    await client.runs.cancel(thread_id, run["run_id"], wait=True, action="rollback")
    for _ in range(100):
        if (await client.threads.get(thread_id))["status"] != "busy":
            break
        await asyncio.sleep(0.05)
    assert (await client.threads.get(thread_id))["status"] in ("idle", "interrupted")
