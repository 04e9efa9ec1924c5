"""Single-process mode (`runyard dev`) bounds retries: lost attempts count, handovers do not."""

from __future__ import annotations

import asyncio
import signal
import time
import uuid
from functools import partial
from pathlib import Path

import httpx
import pytest
from langgraph_sdk import get_client

from tests.chaos.cluster import CHAOS_CONFIG, done_counts, lines_of, read_log_lines, wait_until
from tests.support.server import ServerProcess

MAX_RETRIES = 3  # BG_JOB_MAX_RETRIES's default


def _dev(workdir: Path, **env: str) -> ServerProcess:
    """`runyard dev` on the same data folder each time (a new port per start)."""
    return ServerProcess("dev", workdir, env=dict(env), config=CHAOS_CONFIG)


async def _exited(server: ServerProcess, within: float) -> bool:
    """True when the process exits within `within` seconds."""
    assert server.process is not None
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            return True
        await asyncio.sleep(0.1)
    return False


def _start(server: ServerProcess) -> bool:
    """Start; False when the process died before it answered (a recovered run killed it)."""
    try:
        server.start()
    except RuntimeError:
        return False
    return True


@pytest.mark.slow
@pytest.mark.timeout(180)
async def test_a_run_that_kills_the_server_is_failed_after_the_retry_limit(
    tmp_path: Path,
) -> None:
    """A graph whose node kills the process, `runyard dev` restarted: attempts 1 to 3 die,
    then the run is failed with the reason, and the server stays up."""
    graph_log = tmp_path / "graph.log"
    thread_id = str(uuid.uuid4())
    first = _dev(tmp_path).start()
    async with httpx.AsyncClient(base_url=first.url, timeout=10) as http:
        created = await http.post(
            f"/threads/{thread_id}/runs",
            json={
                "assistant_id": "suicide",
                "input": {"log": str(graph_log)},
                "if_not_exists": "create",
            },
        )
    assert created.status_code == 200, created.text
    run_id = created.json()["run_id"]
    assert await _exited(first, 30), "the first attempt should have killed the server"

    deaths = 1
    survivor: ServerProcess | None = None
    for _ in range(MAX_RETRIES + 2):
        server = _dev(tmp_path)
        if _start(server) and not await _exited(server, 5):
            survivor = server
            break
        deaths += 1
    assert survivor is not None, f"the server never stayed up ({deaths} deaths)"
    try:
        client = get_client(url=survivor.url, api_key=None)
        run = await client.runs.get(thread_id, run_id)
        assert run["status"] == "error", run
        result = await client.runs.join(thread_id, run_id)
        error = result["__error__"]
        assert error["error"] == "RetryLimitExceeded", error
        assert f"retried {MAX_RETRIES} times" in error["message"], error
        thread = await client.threads.get(thread_id)
        assert thread["status"] == "error", thread
        await client.http.client.aclose()
    finally:
        survivor.stop()
    attempts = [line["attempt"] for line in lines_of(read_log_lines(graph_log), run_id, node="die")]
    assert attempts == list(range(1, MAX_RETRIES + 1)), attempts
    assert deaths == MAX_RETRIES


@pytest.mark.slow
@pytest.mark.timeout(180)
async def test_graceful_handovers_use_up_no_retry(tmp_path: Path) -> None:
    """SIGTERM mid-run (no drain time) more often than the retry limit, then one crash:
    the run still resumes and succeeds, each step done once."""
    graph_log = tmp_path / "graph.log"
    thread_id = str(uuid.uuid4())
    env = {"WORKER_DRAIN_TIMEOUT": "0"}
    server = _dev(tmp_path, **env).start()
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as http:
        created = await http.post(
            f"/threads/{thread_id}/runs",
            json={
                "assistant_id": "steps",
                "input": {"log": str(graph_log), "delay": 1.0},
                "if_not_exists": "create",
            },
        )
    assert created.status_code == 200, created.text
    run_id = created.json()["run_id"]
    # MAX_RETRIES handovers, then one lost attempt (SIGKILL): 1 lost of 3 allowed.
    for stop in [signal.SIGTERM] * MAX_RETRIES + [signal.SIGKILL]:
        assert server.process is not None
        pid = server.process.pid
        await wait_until(partial(_started_by, graph_log, run_id, pid), 30, "a step to start")
        server.process.send_signal(stop)
        assert await _exited(server, 20), server.log_path.read_text()[-3000:]
        server = _dev(tmp_path, **env).start()
    try:
        client = get_client(url=server.url, api_key=None)
        run = await client.runs.join(thread_id, run_id)
        status = (await client.runs.get(thread_id, run_id))["status"]
        await client.http.client.aclose()
        assert status == "success", (status, run, server.log_path.read_text()[-3000:])
    finally:
        server.stop()
    lines = read_log_lines(graph_log)
    assert done_counts(lines, run_id) == {f"s{i}": 1 for i in range(1, 6)}, lines
    assert max(line["attempt"] for line in lines_of(lines, run_id)) == MAX_RETRIES + 2


def _started_by(path: Path, run_id: str, pid: int) -> bool:
    return any(line["pid"] == pid for line in lines_of(read_log_lines(path), run_id, phase="start"))
