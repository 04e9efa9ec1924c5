"""A cancel answers 202 with what it did, honestly."""

from __future__ import annotations

import asyncio
import uuid

import httpx


async def _status(http: httpx.AsyncClient, thread_id: str, run_id: str) -> str:
    return str((await http.get(f"/threads/{thread_id}/runs/{run_id}")).json()["status"])


async def test_cancel_of_a_running_run_reports_delivery(base_url: str) -> None:
    thread_id = str(uuid.uuid4())
    async with httpx.AsyncClient(base_url=base_url, timeout=30) as http:
        run = (
            await http.post(
                f"/threads/{thread_id}/runs",
                json={"assistant_id": "slow", "input": {"seconds": 5}, "if_not_exists": "create"},
            )
        ).json()
        for _ in range(200):
            if await _status(http, thread_id, run["run_id"]) == "running":
                break
            await asyncio.sleep(0.05)
        answer = await http.post(f"/threads/{thread_id}/runs/{run['run_id']}/cancel")
        assert answer.status_code == 202
        receipt = answer.json()
        assert receipt["run_id"] == run["run_id"]
        assert receipt["was"] == "running"
        assert receipt["delivered"] is True
        joined = await http.get(f"/threads/{thread_id}/runs/{run['run_id']}/join")
        assert joined.status_code == 200
        assert await _status(http, thread_id, run["run_id"]) == "interrupted"


async def test_cancel_of_a_pending_run_ends_it_at_once(base_url: str) -> None:
    thread_id = str(uuid.uuid4())
    async with httpx.AsyncClient(base_url=base_url, timeout=30) as http:
        run = (
            await http.post(
                f"/threads/{thread_id}/runs",
                json={
                    "assistant_id": "pipeline",
                    "input": {"text": "later"},
                    "if_not_exists": "create",
                    "after_seconds": 30,
                },
            )
        ).json()
        answer = await http.post(f"/threads/{thread_id}/runs/{run['run_id']}/cancel")
        assert answer.status_code == 202
        assert answer.json()["was"] == "pending"
        assert await _status(http, thread_id, run["run_id"]) == "interrupted"


async def test_cancel_of_a_finished_run_is_409_with_its_status(base_url: str) -> None:
    thread_id = str(uuid.uuid4())
    async with httpx.AsyncClient(base_url=base_url, timeout=30) as http:
        run = (
            await http.post(
                f"/threads/{thread_id}/runs/wait",
                json={
                    "assistant_id": "pipeline",
                    "input": {"text": "a"},
                    "if_not_exists": "create",
                },
            )
        ).headers["Content-Location"]
        answer = await http.post(f"{run}/cancel", params={"action": "rollback"})
        assert answer.status_code == 409, answer.text
        assert answer.json()["status"] == "success"
        assert "success" in answer.json()["detail"]
