"""Many streaming clients at once: each POSTs a run of `relay` and reads its SSE to the end.

Every stream is checked against what the graph emits (bench/graphs/relay.py): the input's
values, then per node one custom and one values event, the final values holding every node,
and the `end` event. A stream missing any of these, cut short, or answered 5xx is counted.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from bench.client import Client, HTTPError

ASSISTANT = "relay"
NODES = ("n1", "n2", "n3")
# What one complete stream of `relay` in values + custom modes carries.
EXPECTED = {"values": len(NODES) + 1, "custom": len(NODES), "end": 1}


@dataclass
class Stream:
    """What one client saw."""

    status: int = 0
    counts: dict[str, int] = field(default_factory=dict)
    final: Any = None
    truncated: bool = False
    failure: str | None = None
    first_s: float | None = None
    last_s: float | None = None

    @property
    def missing(self) -> int:
        """Events the client should have received and did not."""
        return sum(max(want - self.counts.get(name, 0), 0) for name, want in EXPECTED.items())

    @property
    def complete(self) -> bool:
        """Every event arrived, the final state holds every node, nothing was cut short."""
        final_ok = isinstance(self.final, dict) and self.final.get("seen") == list(NODES)
        return self.status == 200 and not self.truncated and self.missing == 0 and final_ok


@dataclass
class Outcome:
    """Every client's stream and the wall time of the whole load."""

    streams: list[Stream]
    wall_s: float

    def summary(self) -> dict[str, Any]:
        """Counts a person reads first: complete, missing events, 5xx, truncated, timings."""
        done = sorted(s.last_s for s in self.streams if s.last_s is not None)
        firsts = sorted(s.first_s for s in self.streams if s.first_s is not None)
        failures = [s.failure for s in self.streams if s.failure]
        return {
            "clients": len(self.streams),
            "complete": sum(s.complete for s in self.streams),
            "events_missing": sum(s.missing for s in self.streams),
            "http_5xx": sum(s.status >= 500 for s in self.streams),
            "truncated": sum(s.truncated for s in self.streams),
            "p50_last_event_s": _pct(done, 50),
            "p99_last_event_s": _pct(done, 99),
            "p50_first_event_s": _pct(firsts, 50),
            "wall_s": round(self.wall_s, 2),
            "failures": failures[:5],
        }


def _pct(values: list[float], pct: float) -> float | None:
    if not values:
        return None
    index = min(len(values) - 1, max(0, round(pct / 100 * len(values) + 0.5) - 1))
    return round(values[index], 4)


async def one_stream(client: Client, timeout: float) -> Stream:
    """POST a run of `relay` on a new thread and read its stream to the end."""
    seen = Stream()
    body = {
        "assistant_id": ASSISTANT,
        "input": {"seen": []},
        "stream_mode": ["values", "custom"],
        "if_not_exists": "create",
    }
    path = f"/threads/{uuid.uuid4()}/runs/stream"
    started = time.perf_counter()
    try:
        async with asyncio.timeout(timeout):
            async with client.stream("POST", path, json=body) as response:
                seen.status = response.status_code
                if response.status_code != 200:
                    await response.aread()
                    seen.failure = f"HTTP {response.status_code}: {response.text[:200]}"
                    return seen
                await _read_events(response.aiter_lines(), seen, started)
    except HTTPError as exc:
        seen.truncated = True
        seen.failure = f"cut short: {exc}"[:300]
    except TimeoutError:
        seen.truncated = True
        seen.failure = f"no end within {timeout:g} s: {seen.counts}"
    return seen


async def _read_events(lines: Any, seen: Stream, started: float) -> None:
    event = ""
    async for line in lines:
        if line.startswith("event:"):
            event = line[6:].strip()
        elif line.startswith("data:"):
            now = time.perf_counter() - started
            if seen.first_s is None:
                seen.first_s = now
            seen.last_s = now
            seen.counts[event] = seen.counts.get(event, 0) + 1
            if event == "values":
                seen.final = json.loads(line[5:])
            elif event == "error":
                seen.failure = f"error event: {line[5:200]}"


async def many_streams(
    urls: list[str], clients: int, spread_s: float = 2.0, timeout: float = 300.0
) -> Outcome:
    """`clients` streams at once, their starts spread evenly over `spread_s` seconds; with
    several URLs, the clients are dealt to them in turn."""
    client = Client(urls, connections=clients, timeout=timeout)
    rng = random.Random(clients)

    async def later(delay: float) -> Stream:
        await asyncio.sleep(delay)
        return await one_stream(client, timeout)

    started = time.perf_counter()
    try:
        streams = await asyncio.gather(*(later(rng.uniform(0, spread_s)) for _ in range(clients)))
    finally:
        await client.aclose()
    return Outcome(list(streams), time.perf_counter() - started)


# The `streams` scenario: these numbers of clients at once, one level after the other.
LEVELS = (100, 1000, 3000)
SAMPLE_EVERY_S = 0.5


async def streams(target: Any, runs: int) -> dict[str, Any]:
    """For each level of clients on the target: complete streams, events missing, p50/p99
    from submit to the last event (and as a ratio to the first level), the Redis connections
    the instances hold at the peak, and resident memory grown per connected client.

    `runs` above 0 replaces the last level (`--runs 500`: 100 then 500 clients).
    """
    levels = list(LEVELS) if not runs or runs == LEVELS[-1] else [LEVELS[0], runs]
    figures: dict[str, Any] = {}
    base: dict[str, Any] | None = None
    redis_probe = _redis_probe(target)
    for clients in levels:
        sampler = _Sampler(target.urls, redis_probe)
        await sampler.baseline()
        sampling = asyncio.create_task(sampler.run())
        try:
            outcome = await many_streams(target.urls, clients, timeout=target.timeout * 5)
        finally:
            sampling.cancel()
        level = outcome.summary()
        base = base or level
        level["p50_ratio"] = _ratio(level["p50_last_event_s"], base["p50_last_event_s"])
        level["p99_ratio"] = _ratio(level["p99_last_event_s"], base["p99_last_event_s"])
        level["redis_connections_peak"] = sampler.redis_peak
        grown = sampler.rss_peak - sampler.rss_before if sampler.rss_peak else None
        level["rss_per_client_kib"] = round(grown / clients / 1024, 1) if grown else None
        figures[f"n{clients}"] = level
    return {"levels": figures, "errors": sum(len(v["failures"]) for v in figures.values())}


def _ratio(value: float | None, base: float | None) -> float | None:
    return round(value / base, 2) if value and base else None


def _redis_probe(target: Any) -> tuple[str, str] | None:
    """(Redis URL, key prefix) of a deployment the bench started (else REDIS_URL and
    RUNYARD_REDIS_PREFIX in the bench's environment), to count its connections."""
    env = getattr(target.fleet, "env", None) or os.environ
    url, prefix = env.get("REDIS_URL"), env.get("RUNYARD_REDIS_PREFIX")
    return (url, prefix) if url and prefix else None


class _Sampler:
    """Peak resident memory of the instances (from /metrics) and peak Redis connections
    named after the deployment's prefix (CLIENT LIST), while a level runs."""

    def __init__(self, urls: list[str], redis_probe: tuple[str, str] | None) -> None:
        self._urls = urls
        self._probe = redis_probe
        self.rss_before = 0.0
        self.rss_peak = 0.0
        self.redis_peak: int | None = None

    async def baseline(self) -> None:
        self.rss_before = await self._rss()

    async def run(self) -> None:
        while True:
            self.rss_peak = max(self.rss_peak, await self._rss())
            if self._probe is not None:
                count = await asyncio.to_thread(_connections, *self._probe)
                self.redis_peak = max(self.redis_peak or 0, count)
            await asyncio.sleep(SAMPLE_EVERY_S)

    async def _rss(self) -> float:
        import httpx

        total = 0.0
        async with httpx.AsyncClient(timeout=10, trust_env=False) as http:
            for url in self._urls:
                try:
                    text = (await http.get(url + "/metrics")).text
                except httpx.HTTPError:
                    continue
                for line in text.splitlines():
                    if line.startswith("process_resident_memory_bytes "):
                        total += float(line.split()[1])
        return total


def _connections(url: str, prefix: str) -> int:
    import redis

    with redis.Redis.from_url(url, socket_timeout=5) as client:
        return sum(1 for c in client.client_list() if str(c.get("name", "")).startswith(prefix))
