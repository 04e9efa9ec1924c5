"""A run ended before it started (cancel while pending) ends like any other run."""

from __future__ import annotations

import httpx
import pytest

from tests.support.runs import wait_for_gone
from tests.support.webhooks import WebhookReceiver

pytestmark = pytest.mark.timeout(60)


async def test_a_stateless_run_cancelled_while_pending_leaves_no_thread_and_fires_its_webhook(
    base_url: str, receiver: WebhookReceiver
) -> None:
    async with httpx.AsyncClient(base_url=base_url, timeout=10) as http:
        created = await http.post(
            "/runs",
            json={
                "assistant_id": "pipeline",
                "input": {"text": "a"},
                "after_seconds": 60,
                "webhook": f"{receiver.url}/hook",
            },
        )
        assert created.status_code == 200, created.text
        run = created.json()
        run_id, thread_id = run["run_id"], run["thread_id"]
        cancelled = await http.post(f"/threads/{thread_id}/runs/{run_id}/cancel")
        assert cancelled.status_code < 300, cancelled.text
        _path, body = await receiver.wait_for(run_id)
        assert body["status"] == "interrupted"
        assert body["thread_id"] == thread_id
        # The temporary thread goes with its run, as when a stateless run finishes.
        await wait_for_gone(http, f"/threads/{thread_id}")


async def test_a_run_cancelled_while_pending_ends_its_stream_and_fires_its_webhook(
    base_url: str, receiver: WebhookReceiver
) -> None:
    async with httpx.AsyncClient(base_url=base_url, timeout=10) as http:
        thread = (await http.post("/threads", json={})).json()
        thread_id = thread["thread_id"]
        created = await http.post(
            f"/threads/{thread_id}/runs",
            json={
                "assistant_id": "pipeline",
                "input": {"text": "a"},
                "after_seconds": 60,
                "webhook": f"{receiver.url}/hook",
            },
        )
        run_id = created.json()["run_id"]
        cancelled = await http.post(f"/threads/{thread_id}/runs/{run_id}/cancel")
        assert cancelled.status_code < 300, cancelled.text
        _path, body = await receiver.wait_for(run_id)
        assert body["status"] == "interrupted"
        joined = await http.get(f"/threads/{thread_id}/runs/{run_id}/join")
        assert joined.status_code == 200, joined.text
        stream = await http.get(f"/threads/{thread_id}/runs/{run_id}/stream")
        assert stream.status_code == 200
        # The thread stays (it is the caller's), idle again.
        assert (await http.get(f"/threads/{thread_id}")).json()["status"] == "idle"
