"""Webhooks: a finished run is POSTed to the run's webhook URL."""

from __future__ import annotations

import asyncio

from langgraph_sdk.client import LangGraphClient

from tests.support.runs import (
    kwargs_of,
    new_thread,
)
from tests.support.webhooks import WebhookReceiver


async def test_webhook_receives_the_finished_run(
    client: LangGraphClient, receiver: WebhookReceiver
) -> None:
    thread_id = await new_thread(client)
    run = await client.runs.create(
        thread_id,
        "pipeline",
        input={"text": "a b"},
        webhook=f"{receiver.url}/hooks/done?source=test",
        if_not_exists="create",
    )
    assert kwargs_of(run)["webhook"] == f"{receiver.url}/hooks/done?source=test"
    await client.runs.join(thread_id, run["run_id"])
    path, body = await receiver.wait_for(run["run_id"])
    assert path == "/hooks/done?source=test"
    assert body["status"] == "success"
    assert body["thread_id"] == thread_id
    assert body["assistant_id"] == run["assistant_id"]


async def test_webhook_reports_a_failed_run(
    client: LangGraphClient, receiver: WebhookReceiver
) -> None:
    thread_id = await new_thread(client)
    await client.runs.wait(
        thread_id,
        "fail",
        input={"value": "x"},
        webhook=f"{receiver.url}/hook",
        if_not_exists="create",
        raise_error=False,
    )
    (run,) = await client.runs.list(thread_id)
    _path, body = await receiver.wait_for(run["run_id"])
    assert body["status"] == "error"


async def test_webhook_of_a_stateless_run(
    client: LangGraphClient, receiver: WebhookReceiver
) -> None:
    parts = [
        part
        async for part in client.runs.stream(
            None, "pipeline", input={"text": "a"}, webhook=f"{receiver.url}/hook"
        )
    ]
    run_id = parts[0].data["run_id"]
    _path, body = await receiver.wait_for(run_id)
    assert body["status"] == "success"


async def test_webhook_of_a_cancelled_run(
    client: LangGraphClient, receiver: WebhookReceiver
) -> None:
    thread_id = await new_thread(client)
    run = await client.runs.create(
        thread_id,
        "slow",
        input={"seconds": 2},
        webhook=f"{receiver.url}/hook",
        if_not_exists="create",
    )
    for _ in range(200):
        if (await client.runs.get(thread_id, run["run_id"]))["status"] == "running":
            break
        await asyncio.sleep(0.05)
    await client.runs.cancel(thread_id, run["run_id"], wait=True)
    _path, body = await receiver.wait_for(run["run_id"])
    assert body["status"] == "interrupted"


async def test_webhook_payload_carries_values_and_error(
    client: LangGraphClient, receiver: WebhookReceiver
) -> None:
    """LangGraph Platform adds the final `values` (and `error` on failure) to the run."""
    thread_id = await new_thread(client)
    ok = await client.runs.create(
        thread_id,
        "pipeline",
        input={"text": "a b"},
        webhook=f"{receiver.url}/hook",
        if_not_exists="create",
    )
    await client.runs.join(thread_id, ok["run_id"])
    _path, body = await receiver.wait_for(ok["run_id"])
    assert body["values"]["steps"] == ["tokenize", "analyze", "report"]

    failed = await client.runs.create(
        thread_id, "fail", input={"value": "x"}, webhook=f"{receiver.url}/hook"
    )
    await client.runs.join(thread_id, failed["run_id"])
    _path, body = await receiver.wait_for(failed["run_id"])
    assert body["error"]["error"] == "ValueError"
