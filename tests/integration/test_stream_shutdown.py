"""A server shutting down ends its open event streams: a client joined on a thread gets a
clean end of the body (to resume elsewhere with Last-Event-ID), and the process exits
instead of waiting for a stream that has no end of its own."""

from __future__ import annotations

import signal
from pathlib import Path

import httpx
import pytest

from tests.support.server import ServerProcess

pytestmark = pytest.mark.timeout(90)
# The process exits well within this once its streams end; a stream that kept it waiting
# would hold it forever (`runyard dev` waits for every request in flight).
EXIT_BOUND_SECONDS = 30.0


def test_sigterm_ends_open_thread_streams_cleanly(tmp_path: Path) -> None:
    server = ServerProcess("dev", tmp_path).start()
    try:
        thread_id = httpx.post(f"{server.url}/threads", json={}).json()["thread_id"]
        with httpx.stream("GET", f"{server.url}/threads/{thread_id}/stream", timeout=60) as r:
            assert r.status_code == 200
            assert r.headers["content-type"] == "text/event-stream; charset=utf-8"
            server.signal(signal.SIGTERM)
            # A cut connection would raise here (an incomplete chunked body).
            rest = r.read()
        assert set(rest.split(b"\r\n\r\n")) <= {b": heartbeat", b""}, rest
        assert server.process is not None
        # uvicorn ends by raising the signal it caught again, once it has shut down.
        assert server.process.wait(timeout=EXIT_BOUND_SECONDS) in (0, -signal.SIGTERM)
        output = server.log_path.read_text()
        assert "Finished server process" in output
        assert "without completing response" not in output
    finally:
        server.stop()
