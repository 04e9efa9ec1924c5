"""The `idle_clients` scenario: thousands of connected, mostly idle thread-stream clients.

A chat front end keeps a thread's stream open for as long as its tab is open, run or no run.
`--runs N` clients (2,000 by default) each open `GET /threads/{id}/stream` on one of 100
threads and read now and then, as a background tab does. They are held by a client process
of their own (this module run as `python -m bench.idle_clients`, raw sockets on asyncio with
the open-files limit raised), so the scenario's timing client does not share their event loop.
Ordinary runs (`POST /threads/{id}/runs/wait`, one at a time, on another thread) are timed
before the clients come (the reference, measured in the same bench run) and while they are
there; the server's own `process_resident_memory_bytes` (/metrics) is read before, while they
are connected, and 30 s after they have left. The figures that matter are the ratios.
"""

from __future__ import annotations

import asyncio
import json
import random
import resource
import sys
import time
import uuid
from typing import Any
from urllib.parse import urlsplit

from bench.idle_readers import _mib, _ordinary_runs, _ratio, _rss
from bench.scenarios import Sample, Target, summary

THREADS = 100
WAIT_RUNS = 50
WARM_RUNS = 10
SETTLE_SECONDS = 30.0
# How long every client has to get its answer's head; then the stragglers are counted.
ANSWER_SECONDS = 60.0
# Connections opened at once by the holding process (the rest wait their turn).
OPENING_AT_ONCE = 500
# A client reads what waits for it every READ_EVERY seconds (a background tab).
READ_EVERY = 5.0


async def idle_clients(target: Target, runs: int) -> dict[str, Any]:
    """/wait p50 without and with `runs` idle clients; server memory before, during, after."""
    base = target.urls[0]
    threads = [str(uuid.uuid4()) for _ in range(THREADS)]
    for thread_id in [*threads, reference := str(uuid.uuid4())]:
        created = await target.client.post("/threads", json={"thread_id": thread_id})
        if created.status_code != 200:
            raise RuntimeError(f"POST /threads answered {created.status_code}")
    # Unmeasured first: a thread's first runs pay for what later ones find ready.
    await _ordinary_runs(target, reference, WARM_RUNS, Sample())
    quiet = Sample()
    await _ordinary_runs(target, reference, WAIT_RUNS, quiet)
    # One stream opened and left: what a first use loads is no idle client's cost.
    await _hold(base, threads[:1], 1, hold_seconds=0.5)
    await asyncio.sleep(2.0)
    rss_before = await _rss(target)
    holder = await _start_holder(base, threads, runs)
    try:
        counts = json.loads(await asyncio.wait_for(holder.stdout.readline(), ANSWER_SECONDS + 600))  # type: ignore[union-attr]
        await asyncio.sleep(5.0)  # every stream subscribed, its first keep-alives sent
        rss_during = await _rss(target)
        loaded = Sample()
        await _ordinary_runs(target, reference, WAIT_RUNS, loaded)
    finally:
        if holder.returncode is None:
            holder.stdin.write(b"leave\n")  # type: ignore[union-attr]
            await holder.stdin.drain()  # type: ignore[union-attr]
            await holder.wait()
    await asyncio.sleep(SETTLE_SECONDS)
    rss_after = await _rss(target)
    quiet_s, loaded_s = summary(quiet), summary(loaded)
    connected = counts["connected"]
    return {
        "clients": runs,
        "threads": THREADS,
        "connected": connected,
        "never_answered": counts["never_answered"],
        "refused": counts["refused"],
        "open_seconds": counts["open_seconds"],
        "quiet": quiet_s,
        "with_idle_clients": loaded_s,
        "wait_p50_ratio": _ratio(loaded_s["p50_ms"], quiet_s["p50_ms"]),
        "rss_before_mib": _mib(rss_before),
        "rss_during_mib": _mib(rss_during),
        "rss_after_30s_mib": _mib(rss_after),
        "kib_per_client": round((rss_during - rss_before) / 1024 / max(connected, 1), 1),
        "rss_after_ratio": _ratio(rss_after, rss_before),
        "errors": len(quiet.errors) + len(loaded.errors) + (runs - connected),
    }


async def _start_holder(base: str, threads: list[str], clients: int) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bench.idle_clients",
        base,
        str(clients),
        ",".join(threads),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        limit=1 << 20,
    )


class _Client(asyncio.Protocol):
    """One tab: sends its request, notes the answer's status, reads now and then."""

    __slots__ = ("answered", "lost", "request", "status", "transport")

    def __init__(self, request: bytes) -> None:
        self.request = request
        self.transport: asyncio.Transport | None = None
        self.status = 0
        self.answered = asyncio.get_running_loop().create_future()
        self.lost = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        transport.write(self.request)  # type: ignore[attr-defined]

    def data_received(self, data: bytes) -> None:
        if not self.status and data.startswith(b"HTTP/1.1 "):
            self.status = int(data[9:12])
            if not self.answered.done():
                self.answered.set_result(self.status)

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        if not self.answered.done():
            self.answered.set_result(0)


async def _hold(
    base: str, threads: list[str], clients: int, hold_seconds: float | None = None
) -> dict[str, Any]:
    """Open the clients, report how many got their stream, hold them until told to leave."""
    parts = urlsplit(base)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    loop = asyncio.get_running_loop()
    gate = asyncio.Semaphore(OPENING_AT_ONCE)
    started = time.perf_counter()

    async def open_one(index: int) -> _Client | None:
        path = f"/threads/{threads[index % len(threads)]}/stream"
        request = (
            f"GET {path} HTTP/1.1\r\nhost: {parts.netloc}\r\naccept: text/event-stream\r\n\r\n"
        )
        client = _Client(request.encode())
        async with gate:
            try:
                await loop.create_connection(lambda: client, host, port)
                await asyncio.wait_for(asyncio.shield(client.answered), ANSWER_SECONDS)
            except (OSError, TimeoutError):
                pass
        return client

    held = [c for c in await asyncio.gather(*(open_one(i) for i in range(clients))) if c]
    counts = {
        "connected": sum(1 for c in held if c.status == 200 and not c.lost),
        "refused": sum(1 for c in held if c.status not in (0, 200)),
        "never_answered": sum(1 for c in held if c.status == 0),
        "open_seconds": round(time.perf_counter() - started, 1),
    }
    readers = asyncio.create_task(_read_now_and_then(held))
    try:
        if hold_seconds is not None:
            await asyncio.sleep(hold_seconds)
        else:
            print(json.dumps(counts), flush=True)
            await loop.run_in_executor(None, sys.stdin.readline)
    finally:
        readers.cancel()
        for client in held:
            if client.transport is not None:
                client.transport.abort()
    return counts


async def _read_now_and_then(held: list[_Client]) -> None:
    """Each client reads for a moment every READ_EVERY seconds, at its own moments."""
    for client in held:
        if client.transport is not None and not client.lost:
            client.transport.pause_reading()
    while True:
        batch = random.sample(held, max(1, len(held) // 10))
        for client in batch:
            if client.transport is not None and not client.transport.is_closing():
                client.transport.resume_reading()
        await asyncio.sleep(READ_EVERY / 10)
        for client in batch:
            if client.transport is not None and not client.transport.is_closing():
                client.transport.pause_reading()


def _main() -> None:
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    base, clients, threads = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(",")
    try:
        import uvloop

        uvloop.run(_hold(base, threads, clients))
    except ImportError:
        asyncio.run(_hold(base, threads, clients))


if __name__ == "__main__":
    _main()
