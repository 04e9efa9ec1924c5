"""The `idle_readers` scenario: ordinary runs on a thread while hundreds of clients that
never read are subscribed to it.

Half the idle clients join the thread stream (`GET /threads/{id}/stream`), half open the
thread streaming session's events (`POST /threads/{id}/stream/events`); each sends its
request and never reads a byte, with a small receive buffer so the server meets a full
socket soon. Ordinary runs (`POST /threads/{id}/runs/wait`, one at a time) are timed on the
same thread before the idle clients come (the reference, measured in the same bench run) and
while they are there; the server's resident memory (`/metrics`) before, while they are
connected, and 30 s after their sockets have closed. The figures that matter are the ratios:
run latency with the idle clients over without, and memory after over before.
"""

from __future__ import annotations

import asyncio
import json
import socket
import time
import uuid
from typing import Any
from urllib.parse import urlsplit

from bench.scenarios import Sample, Target, summary

IDLE_PER_KIND = 150
SETTLE_SECONDS = 30.0
# Bytes the idle clients' kernel accepts before the server's writes to them stall.
IDLE_RECEIVE_BUFFER = 4096
SESSION_CHANNELS = ["values", "updates", "messages", "lifecycle", "input", "custom", "tasks"]


async def idle_readers(target: Target, runs: int) -> dict[str, Any]:
    """Run latency p50/p99 without and with the idle clients, RSS before, during, after."""
    base = target.urls[0]
    thread_id = str(uuid.uuid4())
    created = await target.client.post("/threads", json={"thread_id": thread_id})
    if created.status_code != 200:
        raise RuntimeError(f"POST /threads answered {created.status_code}: {created.text[:300]}")
    quiet = Sample()
    await _ordinary_runs(target, thread_id, runs, quiet)
    # Both stream routes once, read: what a first use loads is no idle client's cost.
    await _touch_streams(base, thread_id)
    rss_before = await _rss(target)
    sockets = await _open_idle(base, thread_id, IDLE_PER_KIND)
    try:
        await asyncio.sleep(3.0)  # every idle request is in and subscribed
        loaded = Sample()
        await _ordinary_runs(target, thread_id, runs, loaded)
        rss_during = await _rss(target)
    finally:
        for writer in sockets:
            writer.transport.abort()
    await asyncio.sleep(SETTLE_SECONDS)
    rss_after = await _rss(target)
    after = Sample()
    await _ordinary_runs(target, thread_id, max(1, runs // 4), after)
    quiet_s, loaded_s = summary(quiet), summary(loaded)
    return {
        "idle_clients": len(sockets),
        "quiet": quiet_s,
        "with_idle_clients": loaded_s,
        "p50_ratio": _ratio(loaded_s["p50_ms"], quiet_s["p50_ms"]),
        "p99_ratio": _ratio(loaded_s["p99_ms"], quiet_s["p99_ms"]),
        "rss_before_mib": _mib(rss_before),
        "rss_during_mib": _mib(rss_during),
        "rss_after_30s_mib": _mib(rss_after),
        "rss_after_ratio": _ratio(rss_after, rss_before),
        "errors": len(quiet.errors) + len(loaded.errors) + len(after.errors),
    }


async def _ordinary_runs(target: Target, thread_id: str, runs: int, sample: Sample) -> None:
    body = {"assistant_id": target.assistant_id, "input": target.input}
    for _ in range(runs):
        started = time.perf_counter()
        response = await target.client.post(f"/threads/{thread_id}/runs/wait", json=body)
        if response.status_code != 200:
            sample.failed(f"wait HTTP {response.status_code}: {response.text[:300]}")
            continue
        sample.latencies.append(time.perf_counter() - started)


async def _open_idle(base: str, thread_id: str, per_kind: int) -> list[asyncio.StreamWriter]:
    """Send every idle client's request; nothing is ever read from them."""
    events = json.dumps({"channels": SESSION_CHANNELS}).encode()
    requests = [
        _request(base, "GET", f"/threads/{thread_id}/stream?stream_mode=run_modes", b""),
        _request(base, "POST", f"/threads/{thread_id}/stream/events", events),
    ]
    writers = await asyncio.gather(
        *(_send_and_sit(base, requests[i % 2]) for i in range(2 * per_kind))
    )
    return list(writers)


async def _touch_streams(base: str, thread_id: str) -> None:
    """Open each kind of stream, read its response head, and leave."""
    events = json.dumps({"channels": SESSION_CHANNELS}).encode()
    for request in (
        _request(base, "GET", f"/threads/{thread_id}/stream?stream_mode=run_modes", b""),
        _request(base, "POST", f"/threads/{thread_id}/stream/events", events),
    ):
        parts = urlsplit(base)
        reader, writer = await asyncio.open_connection(parts.hostname, parts.port or 80)
        writer.write(request)
        await reader.readuntil(b"\r\n\r\n")
        writer.transport.abort()
    await asyncio.sleep(1.0)


def _request(base: str, method: str, path: str, body: bytes) -> bytes:
    host = urlsplit(base).netloc
    head = f"{method} {path} HTTP/1.1\r\nhost: {host}\r\naccept: text/event-stream\r\n"
    if body:
        head += f"content-type: application/json\r\ncontent-length: {len(body)}\r\n"
    return head.encode() + b"\r\n" + body


async def _send_and_sit(base: str, request: bytes) -> asyncio.StreamWriter:
    parts = urlsplit(base)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, IDLE_RECEIVE_BUFFER)
    sock.setblocking(False)
    await asyncio.get_running_loop().sock_connect(sock, (parts.hostname, parts.port or 80))
    _, writer = await asyncio.open_connection(sock=sock, limit=IDLE_RECEIVE_BUFFER)
    writer.write(request)
    await writer.drain()
    # The client's own reader would take the server's bytes off the kernel: pause it.
    writer.transport.pause_reading()
    return writer


async def _rss(target: Target) -> float:
    """Resident memory of every instance, summed (process_resident_memory_bytes)."""
    import httpx

    total = 0.0
    async with httpx.AsyncClient(timeout=10, trust_env=False) as http:
        for url in target.urls:
            text = (await http.get(url + "/metrics")).text
            for line in text.splitlines():
                if line.startswith("process_resident_memory_bytes "):
                    total += float(line.split()[1])
    return total


def _mib(value: float) -> float:
    return round(value / 1024 / 1024, 1)


def _ratio(value: float | None, reference: float | None) -> float | None:
    return round(value / reference, 2) if value and reference else None
