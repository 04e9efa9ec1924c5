"""LangSmith: what docs/observability.md says about tracing, and `langsmith_session_name` on runs.

Compared with langgraph-api 0.16.7 (schema.Run, tracing_session.py): a run carries
`langsmith_session_name`, the LangSmith project when tracing is on and null otherwise, and
`GET /threads/{id}/runs?select=langsmith_session_name` answers it.
"""

from __future__ import annotations

import gzip
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from tests.support.server import ServerProcess, free_port

pytestmark = pytest.mark.timeout(90)


class FakeLangSmith:
    """An HTTP server standing in for LangSmith's API: records what it is sent."""

    def __init__(self) -> None:
        self.bodies: list[tuple[str, bytes]] = []
        recorded = self.bodies

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length) if length else b""
                if self.headers.get("content-encoding") == "zstd":
                    body = b"(zstd)" + body
                elif self.headers.get("content-encoding") == "gzip":
                    body = gzip.decompress(body)
                recorded.append((f"{self.command} {self.path}", body))
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.end_headers()
                self.wfile.write(b"{}")

            do_GET = do_POST = do_PATCH = _answer

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def run_posts(self) -> list[tuple[str, bytes]]:
        """Requests that carry runs (the batch or multipart ingestion endpoints)."""
        return [(line, body) for line, body in self.bodies if "/runs" in line]


@pytest.fixture
def langsmith() -> Iterator[FakeLangSmith]:
    fake = FakeLangSmith()
    try:
        yield fake
    finally:
        fake.server.shutdown()
        fake.server.server_close()


def start(tmp_path: Path, env: dict[str, str]) -> ServerProcess:
    cleared = {
        name: "" for name in ("LANGSMITH_TRACING", "LANGCHAIN_TRACING_V2", "LANGSMITH_TRACING_V2")
    }
    return ServerProcess("dev", tmp_path / "server", env={**cleared, **env}).start()


def test_runs_are_traced_to_langsmith_when_tracing_is_on(
    tmp_path: Path, langsmith: FakeLangSmith
) -> None:
    """docs/observability.md: with LANGSMITH_TRACING=true and LANGSMITH_API_KEY, a graph's
    execution is traced to LangSmith (LANGSMITH_ENDPOINT), and the run names the project."""
    env = {
        "LANGSMITH_TRACING": "true",
        "LANGSMITH_API_KEY": "lsv2-test",
        "LANGSMITH_ENDPOINT": langsmith.url,
        "LANGSMITH_PROJECT": "runyard-compat",
    }
    server = start(tmp_path, env)
    try:
        with httpx.Client(base_url=server.url, timeout=30) as http:
            thread_id = http.post("/threads", json={}).json()["thread_id"]
            http.post(
                f"/threads/{thread_id}/runs/wait",
                json={"assistant_id": "pipeline", "input": {"text": "traced words"}},
            )
            runs = http.get(f"/threads/{thread_id}/runs").json()
            selected = http.get(
                f"/threads/{thread_id}/runs", params={"select": "langsmith_session_name"}
            )
        assert runs[0]["langsmith_session_name"] == "runyard-compat"
        assert selected.status_code == 200, selected.text
        assert selected.json() == [{"langsmith_session_name": "runyard-compat"}]
        deadline = time.monotonic() + 20
        while not langsmith.run_posts() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert langsmith.run_posts(), [line for line, _ in langsmith.bodies]
    finally:
        server.stop()


def test_no_langsmith_tracing_by_default_even_with_an_api_key(
    tmp_path: Path, langsmith: FakeLangSmith
) -> None:
    """docs/observability.md: LANGSMITH_API_KEY alone traces nothing; the run's
    langsmith_session_name is null (langgraph dev 0.16.7 answers null too when tracing is off)."""
    env = {"LANGSMITH_API_KEY": "lsv2-test", "LANGSMITH_ENDPOINT": langsmith.url}
    server = start(tmp_path, env)
    try:
        with httpx.Client(base_url=server.url, timeout=30) as http:
            thread_id = http.post("/threads", json={}).json()["thread_id"]
            http.post(
                f"/threads/{thread_id}/runs/wait",
                json={"assistant_id": "pipeline", "input": {"text": "untraced"}},
            )
            selected = http.get(
                f"/threads/{thread_id}/runs", params={"select": "langsmith_session_name"}
            )
        assert selected.json() == [{"langsmith_session_name": None}]
        time.sleep(2)
        assert not langsmith.run_posts()
    finally:
        server.stop()
