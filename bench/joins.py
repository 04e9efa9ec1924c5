"""Joins of short runs, as `client.runs.join_stream` makes them: how long after its run's end
each join ends.

Each lane loops: create a background run on a fresh thread, join its event stream at once
(`GET /threads/{id}/runs/{run_id}/stream`, with the query and headers langgraph-sdk sends),
read it to its end, then read the run. A short run often ends while its join opens, so
every moment of a run's life is joined, its end included. What counts is the time from the
run's end (its `updated_at`, written by the database clock as the run ends) to the end of
its join, on the client's clock: both clocks are the host's when client and server share it
(the bench's started servers), so an external target on another host shifts it by the
difference between the clocks.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from bench.client import Client
from bench.scenarios import Sample, Target, in_parallel, percentile

# A join that ends later than this after its run is counted as slow.
SLOW_JOIN_SECONDS = 2.0
# Upper bounds (ms) of the distribution's buckets; the last bucket is everything above.
BUCKETS_MS = (5, 10, 25, 50, 100, 250, 500, 1000, 2000, 5000, 10000)
# What the SDK's join_stream sends besides the path (no stream_mode given: empty).
JOIN_QUERY = "?cancel_on_disconnect=false&stream_mode="
JOIN_HEADERS = {"Accept": "text/event-stream", "Cache-Control": "no-store"}


@dataclass
class Joins:
    """Per join: its lag after the run's end, how long it was open, what it carried."""

    after_end: list[float] = field(default_factory=list)
    open_for: list[float] = field(default_factory=list)
    without_events: int = 0
    slow: list[dict[str, Any]] = field(default_factory=list)
    sample: Sample = field(default_factory=Sample)


async def _join(client: Client, thread_id: str, run_id: str) -> tuple[int, list[str]]:
    """Read the run's join stream to its end: the HTTP status and the events' names."""
    path = f"/threads/{thread_id}/runs/{run_id}/stream{JOIN_QUERY}"
    events: list[str] = []
    async with client.stream("GET", path, headers=JOIN_HEADERS) as response:
        if response.status_code != 200:
            await response.aread()
            return response.status_code, events
        async for line in response.aiter_lines():
            if line.startswith("event:"):
                events.append(line[6:].strip())
    return 200, events


async def join_one(target: Target, joins: Joins) -> None:
    """One run on a fresh thread, joined as it executes, then read."""
    thread_id = str(uuid.uuid4())
    body = {"assistant_id": target.assistant_id, "input": target.input, "if_not_exists": "create"}
    created = await target.client.post(f"/threads/{thread_id}/runs", json=body)
    if created.status_code != 200:
        joins.sample.failed(f"create HTTP {created.status_code}: {created.text[:300]}")
        return
    run_id = created.json()["run_id"]
    opened = time.perf_counter()
    status, events = await _join(target.client, thread_id, run_id)
    ended_at, open_for = time.time(), time.perf_counter() - opened
    if status != 200 or "error" in events:
        joins.sample.failed(f"join HTTP {status}, events {events[-3:]}")
        return
    run = await target.client.get(f"/threads/{thread_id}/runs/{run_id}")
    if run.status_code != 200 or run.json().get("status") != "success":
        joins.sample.failed(f"run HTTP {run.status_code}: {run.text[:300]}")
        return
    finished = datetime.fromisoformat(run.json()["updated_at"]).timestamp()
    lag = max(ended_at - finished, 0.0)
    joins.after_end.append(lag)
    joins.open_for.append(open_for)
    joins.without_events += not events
    if lag > SLOW_JOIN_SECONDS:
        joins.slow.append({"run_id": run_id, "after_end_ms": round(lag * 1000), "events": events})


def distribution(values: list[float]) -> dict[str, int]:
    """How many values (seconds) fall in each bucket of BUCKETS_MS, by upper bound."""
    counts = dict.fromkeys([f"le_{bound}_ms" for bound in BUCKETS_MS] + ["over"], 0)
    for value in values:
        ms = value * 1000
        bound = next((b for b in BUCKETS_MS if ms <= b), None)
        counts[f"le_{bound}_ms" if bound is not None else "over"] += 1
    return counts


def _ms(values: list[float], pct: float) -> float:
    return round(percentile(values, pct) * 1000, 2)


async def joins(target: Target, runs: int) -> dict[str, Any]:
    """`runs` joins of short runs, `concurrency` at once: their lag after the run's end."""
    made = Joins()
    started = time.perf_counter()
    await in_parallel(runs, target.concurrency, lambda: join_one(target, made))
    lags = made.after_end
    return {
        "total": len(lags),
        "errors": len(made.sample.errors),
        "concurrency": target.concurrency,
        "elapsed_s": round(time.perf_counter() - started, 3),
        "slower_than_2s": len(made.slow),
        "join_after_end_p50_ms": _ms(lags, 50),
        "join_after_end_p99_ms": _ms(lags, 99),
        "join_after_end_p999_ms": _ms(lags, 99.9),
        "join_after_end_max_ms": round(max(lags, default=float("nan")) * 1000, 2),
        "join_open_p50_ms": _ms(made.open_for, 50),
        "join_open_max_ms": round(max(made.open_for, default=float("nan")) * 1000, 2),
        "joins_without_events": made.without_events,
        "after_end_distribution": distribution(lags),
        "slow_joins": made.slow[:10],
    }
