"""Hundreds of connected thread-stream clients on one `runyard serve` (PostgreSQL and Redis):
every one gets its stream, each costs the server a bounded amount of memory, and what they
held is given back for the next crowd once they leave.

500 clients open `GET /threads/{id}/stream` on 25 threads from raw sockets (each reads its
answer's head, then sits, as a background tab does). No timing is asserted: the answers,
the server's own `process_resident_memory_bytes` and `process_open_fds` (/metrics) before,
while they are connected, after they have left, and after a second crowd has come and gone.
A second crowd that needed the memory of the first again would show a leak, whatever the
allocator keeps. bench/idle_clients.py measures the same at 2,000 and 10,000 clients.
"""

from __future__ import annotations

import asyncio
import resource
import uuid
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest

from tests.integration.test_idle_readers import ended_streams
from tests.support.databases import fresh_database
from tests.support.metrics import Samples, scrape, value
from tests.support.redis_keys import delete_keys
from tests.support.server import ServerProcess

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]
REDIS_URL = "redis://127.0.0.1:6379/0"
CLIENTS = 500
THREADS = 25
# Generous: about 35 KiB per idle client was measured at 2,000 (bench/README.md).
MAX_KIB_PER_CLIENT = 80
# What a second crowd may add to what the first left behind, as a share of what the first
# took: its streams reuse the memory the first gave back.
MAX_SECOND_CROWD_SHARE = 0.25


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """`runyard serve` on a fresh PostgreSQL database and the shared Redis (own prefix)."""
    workdir = tmp_path_factory.mktemp("idle-clients")
    prefix = f"idle-clients-{uuid.uuid4().hex[:8]}:"
    with fresh_database(migrated=True) as url:
        env = {"DATABASE_URL": url, "REDIS_URL": REDIS_URL, "RUNYARD_REDIS_PREFIX": prefix}
        serve = ServerProcess("serve", workdir, env=env)
        try:
            yield serve.start()
        finally:
            serve.stop()
            delete_keys(REDIS_URL, prefix)


@pytest.fixture
async def http(server: ServerProcess) -> AsyncIterator[httpx.AsyncClient]:
    """An HTTP client of the server."""
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
        yield client


async def open_client(server: ServerProcess, thread_id: str) -> tuple[bytes, asyncio.StreamWriter]:
    """A tab: the thread stream's request, its answer's head read, then nothing more."""
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    writer.write(f"GET /threads/{thread_id}/stream HTTP/1.1\r\nhost: x\r\n\r\n".encode())
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 60)
    writer.transport.pause_reading()
    return head, writer


async def crowd(
    server: ServerProcess, http: httpx.AsyncClient, threads: list[str]
) -> tuple[Samples, Samples]:
    """Open CLIENTS streams, check each is answered, close them all and wait until the
    server has ended every one; the metrics while they were connected and after."""
    before = await scrape(http)
    gate = asyncio.Semaphore(200)

    async def one(index: int) -> tuple[bytes, asyncio.StreamWriter]:
        async with gate:
            return await open_client(server, threads[index % len(threads)])

    opened = await asyncio.gather(*(one(i) for i in range(CLIENTS)))
    try:
        heads = [head.split(b"\r\n", 1)[0] for head, _ in opened]
        assert heads == [b"HTTP/1.1 200 OK"] * CLIENTS
        await asyncio.sleep(2.0)  # every stream subscribed, its first keep-alives sent
        during = await scrape(http)
    finally:
        for _, writer in opened:
            writer.transport.abort()
    for _ in range(300):
        after = await scrape(http)
        if ended_streams(after) - ended_streams(before) >= CLIENTS:
            break
        await asyncio.sleep(0.1)
    assert ended_streams(after) - ended_streams(before) == CLIENTS
    await asyncio.sleep(4.0)  # the crowd's departure is noticed and the heap trimmed
    return during, await scrape(http)


def rss(samples: Samples) -> float:
    """The server's resident memory, bytes."""
    return value(samples, "process_resident_memory_bytes")


async def test_five_hundred_idle_clients_are_answered_and_their_memory_serves_the_next(
    server: ServerProcess, http: httpx.AsyncClient
) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 2 * CLIENTS:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4 * CLIENTS), hard))
    threads = []
    for _ in range(THREADS):
        threads.append((await http.post("/threads", json={})).json()["thread_id"])
    # One stream opened and left first: what a first use loads is no client's cost.
    _, writer = await open_client(server, threads[0])
    writer.transport.abort()
    await asyncio.sleep(1.0)
    quiet = await scrape(http)

    during, after = await crowd(server, http, threads)
    assert value(during, "process_open_fds") >= value(quiet, "process_open_fds") + CLIENTS
    per_client_kib = (rss(during) - rss(quiet)) / CLIENTS / 1024
    assert per_client_kib <= MAX_KIB_PER_CLIENT, f"{per_client_kib:.1f} KiB per idle client"
    # Every connection is closed on the server's side too (the database pool may have grown
    # by a few connections meanwhile).
    assert value(after, "process_open_fds") <= value(quiet, "process_open_fds") + CLIENTS // 10

    _, again = await crowd(server, http, threads)
    grown = rss(again) - rss(after)
    took = rss(during) - rss(quiet)
    assert grown <= MAX_SECOND_CROWD_SHARE * took, (
        f"a second crowd of {CLIENTS} left {grown / 2**20:.1f} MiB more behind "
        f"(the first took {took / 2**20:.1f} MiB)"
    )
