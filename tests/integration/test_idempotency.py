"""Idempotent submission: a retried POST with the same Idempotency-Key makes one run."""

from __future__ import annotations

import asyncio
import uuid

import httpx


async def test_same_key_returns_the_first_run_and_executes_once(base_url: str) -> None:
    thread_id = str(uuid.uuid4())
    key = f"key-{uuid.uuid4()}"
    body = {"assistant_id": "pipeline", "input": {"text": "once"}, "if_not_exists": "create"}
    async with httpx.AsyncClient(base_url=base_url, timeout=30) as http:
        answers = await asyncio.gather(
            *[
                http.post(f"/threads/{thread_id}/runs", json=body, headers={"Idempotency-Key": key})
                for _ in range(4)
            ]
        )
        assert [a.status_code for a in answers] == [200] * 4
        run_ids = {a.json()["run_id"] for a in answers}
        assert len(run_ids) == 1
        run_id = run_ids.pop()
        joined = await http.get(f"/threads/{thread_id}/runs/{run_id}/join")
        assert joined.json()["steps"] == ["tokenize", "analyze", "report"]
        listed = (await http.get(f"/threads/{thread_id}/runs")).json()
        assert [r["run_id"] for r in listed] == [run_id]


async def test_same_key_with_another_body_is_a_conflict(base_url: str) -> None:
    thread_id = str(uuid.uuid4())
    key = f"key-{uuid.uuid4()}"
    body = {"assistant_id": "pipeline", "input": {"text": "a"}, "if_not_exists": "create"}
    async with httpx.AsyncClient(base_url=base_url, timeout=30) as http:
        first = await http.post(
            f"/threads/{thread_id}/runs", json=body, headers={"Idempotency-Key": key}
        )
        assert first.status_code == 200
        other = {**body, "input": {"text": "b"}}
        second = await http.post(
            f"/threads/{thread_id}/runs", json=other, headers={"Idempotency-Key": key}
        )
        assert second.status_code == 409
        assert "Idempotency-Key" in second.json()["detail"]
