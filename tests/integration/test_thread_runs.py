"""A thread's runs as one state machine, over HTTP against real servers: strategies under
concurrency, the thread's status, the next run after a delete, delayed runs."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
from langgraph_sdk.client import LangGraphClient

from tests.support.runs import TERMINAL, new_thread, wait_for_status


async def _run(
    http: httpx.AsyncClient, thread_id: str, seconds: float, **fields: Any
) -> httpx.Response:
    body = {"assistant_id": "slow", "input": {"seconds": seconds}, **fields}
    return await http.post(f"/threads/{thread_id}/runs", json=body)


async def _thread_status(http: httpx.AsyncClient, thread_id: str) -> str:
    return str((await http.get(f"/threads/{thread_id}")).json()["status"])


async def _running_and_queued(
    client: LangGraphClient, http: httpx.AsyncClient
) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """A new thread with a 3 s run running and another queued behind it."""
    thread_id = await new_thread(client)
    running = (await _run(http, thread_id, 3)).json()
    await wait_for_status(client, thread_id, running["run_id"], {"running"})
    queued = (await _run(http, thread_id, 0.01, multitask_strategy="enqueue")).json()
    return thread_id, running, queued


async def test_interrupt_racing_a_cancel_of_a_queued_run_never_answers_500(
    client: LangGraphClient, base_url: str
) -> None:
    """Creating with `interrupt` locks the thread, then its runs; a cancel of the queued run
    must lock in the same order, or PostgreSQL breaks the deadlock with an error."""
    answers: list[int] = []
    async with httpx.AsyncClient(base_url=base_url, timeout=30) as http:
        for _round in range(40):
            thread_id = await new_thread(client)
            first = (await _run(http, thread_id, 5)).json()
            queued = (await _run(http, thread_id, 0.01, multitask_strategy="enqueue")).json()
            cancel, create = await asyncio.gather(
                http.post(f"/threads/{thread_id}/runs/{queued['run_id']}/cancel"),
                _run(http, thread_id, 0.01, multitask_strategy="interrupt"),
            )
            answers += [cancel.status_code, create.status_code]
            await wait_for_status(client, thread_id, first["run_id"], TERMINAL, timeout=20)
    assert not [code for code in answers if code >= 500]


async def test_reject_accepts_one_of_several_concurrent_runs_on_an_idle_thread(
    client: LangGraphClient, base_url: str
) -> None:
    async with httpx.AsyncClient(base_url=base_url, timeout=30) as http:
        for _round in range(15):
            thread_id = await new_thread(client)
            answers = await asyncio.gather(
                *(_run(http, thread_id, 0.05, multitask_strategy="reject") for _ in range(8))
            )
            codes = sorted(answer.status_code for answer in answers)
            assert codes == [200] + [409] * 7, codes


async def test_cancelling_a_queued_run_keeps_the_thread_busy_while_another_runs(
    client: LangGraphClient, base_url: str
) -> None:
    async with httpx.AsyncClient(base_url=base_url, timeout=30) as http:
        thread_id, running, queued = await _running_and_queued(client, http)
        await http.post(f"/threads/{thread_id}/runs/{queued['run_id']}/cancel")
        assert await _thread_status(http, thread_id) == "busy"
        queued = (await _run(http, thread_id, 0.01, multitask_strategy="enqueue")).json()
        await http.delete(f"/threads/{thread_id}/runs/{queued['run_id']}")
        assert await _thread_status(http, thread_id) == "busy"
        await wait_for_status(client, thread_id, running["run_id"], TERMINAL, timeout=20)
        assert await _thread_status(http, thread_id) == "idle"


async def test_deleting_the_running_run_starts_the_next_queued_one(
    client: LangGraphClient, base_url: str
) -> None:
    async with httpx.AsyncClient(base_url=base_url, timeout=30) as http:
        thread_id, running, queued = await _running_and_queued(client, http)
        response = await http.delete(f"/threads/{thread_id}/runs/{running['run_id']}")
        assert response.status_code == 204
        # Far below the sweeper's 30 s, which is what found the stranded run before.
        await wait_for_status(client, thread_id, queued["run_id"], {"success"}, timeout=10)


async def test_a_delayed_run_does_not_hold_back_a_run_due_now(
    client: LangGraphClient, base_url: str
) -> None:
    async with httpx.AsyncClient(base_url=base_url, timeout=30) as http:
        thread_id = await new_thread(client)
        delayed = (await _run(http, thread_id, 0.01, after_seconds=30)).json()
        due = (await _run(http, thread_id, 0.01, multitask_strategy="enqueue")).json()
        await wait_for_status(client, thread_id, due["run_id"], {"success"}, timeout=10)
        assert (await client.runs.get(thread_id, delayed["run_id"]))["status"] == "pending"
        # Ordered by start time, as LangGraph lists them: the delayed run starts last.
        listed = [run["run_id"] for run in await client.runs.list(thread_id)]
        assert listed == [delayed["run_id"], due["run_id"]]
        await http.post(f"/threads/{thread_id}/runs/{delayed['run_id']}/cancel")
