"""Webhooks: a finished run is POSTed to the run's webhook URL."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from langgraph_sdk.client import LangGraphClient

from tests.support.runs import (
    kwargs_of,
    new_thread,
)


class WebhookReceiver:
    """A tiny HTTP server on 127.0.0.1 that records every POST it receives."""

    def __init__(self) -> None:
        self.received: list[tuple[str, dict[str, Any]]] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(length) or b"null")
                receiver.received.append((self.path, body))
                self.send_response(200)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                """Keep test output quiet."""

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        """Base URL of the receiver."""
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> None:
        """Serve in a background thread."""
        self._thread.start()

    def stop(self) -> None:
        """Stop serving."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    async def wait_for(self, run_id: str, timeout: float = 10.0) -> tuple[str, dict[str, Any]]:
        """The delivery of `run_id` (fails after a generous timeout)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for path, body in self.received:
                if isinstance(body, dict) and body.get("run_id") == run_id:
                    return path, body
            await asyncio.sleep(0.05)
        pytest.fail(f"no webhook for run {run_id}; received {self.received!r}")


@pytest.fixture
def receiver() -> Iterator[WebhookReceiver]:
    """A running webhook receiver."""
    server = WebhookReceiver()
    server.start()
    try:
        yield server
    finally:
        server.stop()


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
