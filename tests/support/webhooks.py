"""A webhook receiver: a tiny HTTP server that records the runs POSTed to it."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest


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
