"""Subscribers of a thread that never read cost only themselves: while they sit on the
thread, its ordinary runs complete, the server's work does not grow with their number (one
look for the thread's next run, one read of each run's events, for all of them), and once
their sockets close every one of them is released.

Raw sockets send `GET /threads/{id}/stream` and `POST /threads/{id}/stream/events` and never
read, against `runyard dev` and `runyard serve` with PostgreSQL and Redis. No timing is
asserted: the database statements sent while they wait (which grew by four a second per
subscriber, each polling for the thread's next run), and the requests' ends in /metrics.
bench/idle_readers.py measures the latency and memory of the same situation at 300 clients.
"""

from __future__ import annotations

import asyncio
import json
import socket
import uuid
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest

from tests.support.databases import fresh_database
from tests.support.metrics import Samples, scrape, value
from tests.support.redis_keys import delete_keys
from tests.support.server import ServerProcess

pytestmark = pytest.mark.timeout(120)
REDIS_URL = "redis://127.0.0.1:6379/0"
IDLE_PER_KIND = 20
WINDOW_SECONDS = 2.0
# Ordinary runs in the shared-read test, and the reads of their events each may open: its
# /wait's own and the one the thread's streams share. (Each stream reading alone, 20 idle
# thread streams opened twenty a run.)
SHARED_RUNS = 3
MAX_READS_PER_RUN = 3
# One shared look for the thread's next run, four a second, plus a thread check: about ten
# statements in the window, whatever the number of idle subscribers. (Each polling alone,
# 40 subscribers sent about 320.)
MAX_STATEMENTS_IN_WINDOW = 40
STREAM_ROUTES = (
    ("GET", "/threads/{thread_id}/stream"),
    ("POST", "/threads/{thread_id}/stream/events"),
)


@pytest.fixture(scope="module", params=["dev", "serve-redis"])
def deployment(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    """`runyard dev`, or `runyard serve` on PostgreSQL and Redis."""
    workdir = tmp_path_factory.mktemp(f"idle-{request.param}")
    if request.param == "dev":
        dev = ServerProcess("dev", workdir).start()
        try:
            yield dev
        finally:
            dev.stop()
        return
    prefix = f"idle-{uuid.uuid4().hex[:8]}:"
    with fresh_database(migrated=True) as url:
        env = {"DATABASE_URL": url, "REDIS_URL": REDIS_URL, "RUNYARD_REDIS_PREFIX": prefix}
        serve = ServerProcess("serve", workdir, env=env)
        try:
            yield serve.start()
        finally:
            serve.stop()
            delete_keys(REDIS_URL, prefix)


@pytest.fixture
async def http(deployment: ServerProcess) -> AsyncIterator[httpx.AsyncClient]:
    """An HTTP client of the deployment."""
    async with httpx.AsyncClient(base_url=deployment.url, timeout=30) as client:
        yield client


def idle_subscriber(server: ServerProcess, request: bytes) -> socket.socket:
    """A client that sends its request and never reads (a small receive buffer, so the
    server meets a full socket soon)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.settimeout(10)
    sock.connect(("127.0.0.1", server.port))
    sock.sendall(request)
    return sock


def requests_for(thread_id: str) -> list[bytes]:
    """The thread stream's and the session's events requests."""
    body = json.dumps({"channels": ["values", "lifecycle", "updates"]}).encode()
    return [
        f"GET /threads/{thread_id}/stream HTTP/1.1\r\nhost: x\r\n\r\n".encode(),
        (
            f"POST /threads/{thread_id}/stream/events HTTP/1.1\r\nhost: x\r\n"
            f"content-type: application/json\r\ncontent-length: {len(body)}\r\n\r\n"
        ).encode()
        + body,
    ]


def ended_streams(samples: Samples) -> float:
    """How many thread-stream and session-events requests have ended (any status)."""
    total = 0.0
    for (name, labels), count in samples.items():
        if name != "runyard_http_request_duration_seconds_count":
            continue
        found = dict(labels)
        if (found.get("method"), found.get("route")) in STREAM_ROUTES:
            total += count
    return total


async def ordinary_run(http: httpx.AsyncClient, thread_id: str) -> None:
    """One run on the thread, to its end."""
    response = await http.post(
        f"/threads/{thread_id}/runs/wait",
        json={"assistant_id": "pipeline", "input": {"text": "idle readers"}},
    )
    assert response.status_code == 200, response.text
    assert "__error__" not in response.json()


async def test_idle_subscribers_neither_hold_runs_nor_outlive_their_sockets(
    deployment: ServerProcess, http: httpx.AsyncClient
) -> None:
    thread_id = (await http.post("/threads", json={})).json()["thread_id"]
    await ordinary_run(http, thread_id)
    before = await scrape(http)
    requests = requests_for(thread_id)
    sockets = [idle_subscriber(deployment, requests[i % 2]) for i in range(2 * IDLE_PER_KIND)]
    try:
        await asyncio.sleep(1.0)  # every request is in and waiting for the thread's next run
        start = value(await scrape(http), "runyard_db_statements_total", database="runs")
        await asyncio.sleep(WINDOW_SECONDS)
        end = value(await scrape(http), "runyard_db_statements_total", database="runs")
        assert end - start <= MAX_STATEMENTS_IN_WINDOW, (
            f"{end - start:g} statements in {WINDOW_SECONDS:g} s with "
            f"{len(sockets)} idle subscribers"
        )
        for _ in range(3):
            await ordinary_run(http, thread_id)
    finally:
        for sock in sockets:
            sock.close()
    # Every idle request ends once its socket is gone, and none holds a subscription.
    for _ in range(100):
        after = await scrape(http)
        if ended_streams(after) - ended_streams(before) >= len(sockets):
            break
        await asyncio.sleep(0.1)
    assert ended_streams(after) - ended_streams(before) == len(sockets)
    assert value(after, "runyard_stream_subscribers") == value(before, "runyard_stream_subscribers")


async def test_a_threads_idle_streams_share_one_read_of_each_run(
    deployment: ServerProcess, http: httpx.AsyncClient
) -> None:
    thread_id = (await http.post("/threads", json={})).json()["thread_id"]
    await ordinary_run(http, thread_id)
    thread_stream = requests_for(thread_id)[0]
    sockets = [idle_subscriber(deployment, thread_stream) for _ in range(IDLE_PER_KIND)]
    try:
        await asyncio.sleep(1.0)  # every stream is in and waiting for the thread's next run
        before = value(await scrape(http), "runyard_stream_subscriptions_total")
        for _ in range(SHARED_RUNS):
            await ordinary_run(http, thread_id)
        await asyncio.sleep(1.0)  # the streams have found the runs and read them
        opened = value(await scrape(http), "runyard_stream_subscriptions_total") - before
    finally:
        for sock in sockets:
            sock.close()
    assert 0 < opened <= SHARED_RUNS * MAX_READS_PER_RUN, (
        f"{opened:g} reads of run events for {SHARED_RUNS} runs with {len(sockets)} idle "
        "thread streams"
    )
