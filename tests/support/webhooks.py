"""A webhook receiver: a tiny HTTP server that records the runs POSTed to it."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest


class Concurrency:
    """How many requests are being answered at once, and the most there ever were."""

    def __init__(self) -> None:
        self.now = 0
        self.peak = 0
        self._lock = threading.Lock()

    def enter(self) -> None:
        """A request arrived."""
        with self._lock:
            self.now += 1
            self.peak = max(self.peak, self.now)

    def leave(self) -> None:
        """A request was answered."""
        with self._lock:
            self.now -= 1


class ReceiverServer(ThreadingHTTPServer):
    """Accepts as many connections at once as a burst of deliveries opens."""

    request_queue_size = 512
    daemon_threads = True


class WebhookReceiver:
    """A tiny HTTP server on 127.0.0.1 that records every POST it receives."""

    def __init__(self, concurrency: Concurrency | None = None) -> None:
        # Requests being answered at once (shared by receivers given the same one).
        self.concurrency = concurrency or Concurrency()
        # Seconds each answer takes (a slow receiver).
        self.delay = 0.0
        self.received: list[tuple[str, dict[str, Any]]] = []
        # Every request as it arrived: path, headers (lower-cased names), raw body.
        self.requests: list[tuple[str, dict[str, str], bytes]] = []
        # Answer this status to the first `failures` requests (then 200).
        self.failures = 0
        self.failure_status = 500
        # When set: the first request is held open until `hold` is set, then dropped
        # unanswered (an attempt lost with its sender).
        self.hold: threading.Event | None = None
        self._held = False
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                # Counted until its answer starts: the sender cannot have it before then.
                receiver.concurrency.enter()
                try:
                    length = int(self.headers.get("content-length") or 0)
                    raw = self.rfile.read(length)
                    if receiver.delay:
                        time.sleep(receiver.delay)
                finally:
                    receiver.concurrency.leave()
                headers = {k.lower(): v for k, v in self.headers.items()}
                receiver.requests.append((self.path, headers, raw))
                if receiver.hold is not None and not receiver._held:
                    receiver._held = True
                    receiver.hold.wait(timeout=60)
                    self.close_connection = True
                    return
                if receiver.failures > 0:
                    receiver.failures -= 1
                    self.send_response(receiver.failure_status)
                    self.send_header("location", "/elsewhere")
                    self.send_header("content-length", "0")
                    self.end_headers()
                    return
                receiver.received.append((self.path, json.loads(raw or b"null")))
                self.send_response(200)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                """Keep test output quiet."""

        self._server = ReceiverServer(("127.0.0.1", 0), Handler)
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


class SignatureError(Exception):
    """A delivery whose Standard Webhooks signature does not verify."""


def verify_signature(
    secret: str, headers: dict[str, str], body: bytes, tolerance: float = 300.0
) -> None:
    """Verify a delivery as a receiver would (Standard Webhooks): HMAC-SHA256 of
    `id.timestamp.body` with the base64 key after `whsec_`, timestamp within `tolerance`."""
    key = base64.b64decode(secret.removeprefix("whsec_"))
    message_id, stamp = headers["webhook-id"], headers["webhook-timestamp"]
    if abs(time.time() - int(stamp)) > tolerance:
        raise SignatureError("timestamp too old or too new")
    signed = f"{message_id}.{stamp}.".encode() + body
    expected = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
    for signature in headers["webhook-signature"].split():
        version, _, value = signature.partition(",")
        if version == "v1" and hmac.compare_digest(value, expected):
            return
    raise SignatureError("no matching signature")


@pytest.fixture
def receiver() -> Iterator[WebhookReceiver]:
    """A running webhook receiver."""
    server = WebhookReceiver()
    server.start()
    try:
        yield server
    finally:
        server.stop()
