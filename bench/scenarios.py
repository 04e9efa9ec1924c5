"""The benchmark scenarios: throughput, /wait and stream latency, sleeping runs (HTTP only)."""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from bench.client import Client, Response, open_client

log = logging.getLogger("bench")

SLOW_RUN_SECONDS = 5.0

# The sleepers scenario: bench/graphs/sleepy.py sleeps this long in its one node.
SLEEPY = "sleepy"
SLEEPY_INPUT: dict[str, Any] = {"n": 0}
SLEEP_SECONDS = 1.0
# Joins in flight at once in the sleepers scenario (each a long poll holding a connection).
JOIN_LANES = 50


class Fleet(Protocol):
    """Instances the bench started itself, which a scenario may kill and restart."""

    @property
    def urls(self) -> list[str]:
        """Base URL of every instance."""
        ...

    def index_of(self, pid: int) -> int | None:
        """Which instance has this process id, if any."""
        ...

    def kill(self, index: int) -> None:
        """SIGKILL one instance."""
        ...

    def restart(self, index: int) -> None:
        """Start a fresh process in place of a killed instance, at the same URL."""
        ...


@dataclass
class Target:
    """What to benchmark and how hard."""

    client: Client
    assistant_id: str
    input: dict[str, Any]
    concurrency: int
    timeout: float = 120.0
    fleet: Fleet | None = None
    urls: list[str] = field(default_factory=list)
    """Base URL of every instance: for per-instance requests and clients of a scenario's own."""


@dataclass
class Sample:
    """Latencies of one leg of a scenario, in seconds, and the failures seen."""

    latencies: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def failed(self, reason: str) -> None:
        """Record a failure, logging the first few so a broken target is visible at once."""
        if len(self.errors) < 3:
            log.warning("bench_request_failed reason=%s", reason)
        self.errors.append(reason)


def percentile(values: list[float], pct: float) -> float:
    """The pct-th percentile by linear interpolation between closest ranks."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    rank = (len(ordered) - 1) * pct / 100
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def summary(sample: Sample, prefix: str = "") -> dict[str, Any]:
    """p50/p95/p99 in milliseconds, with the count of successes and errors."""
    ms = [value * 1000 for value in sample.latencies]
    return {
        "n": len(ms),
        "errors": len(sample.errors),
        **{f"{prefix}p{p}_ms": round(percentile(ms, p), 2) for p in (50, 95, 99)},
    }


async def in_parallel(total: int, concurrency: int, one: Callable[[], Awaitable[None]]) -> None:
    """Call `one` `total` times with exactly `concurrency` calls in flight until the end."""
    remaining = total

    async def lane() -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            await one()

    await asyncio.gather(*(lane() for _ in range(max(1, min(concurrency, total)))))


def _run_body(target: Target, **extra: Any) -> dict[str, Any]:
    return {"assistant_id": target.assistant_id, "input": target.input, **extra}


def _result_error(body: Any) -> str | None:
    if isinstance(body, dict) and "__error__" in body:
        return f"run failed: {json.dumps(body['__error__'])[:300]}"
    return None


def _join_failure(joined: Response) -> str | None:
    """Why a /join response is not a successful run's result, or None."""
    if joined.status_code != 200:
        return f"join HTTP {joined.status_code}: {joined.text[:300]}"
    return _result_error(joined.json())


async def background_run(target: Target, sample: Sample) -> None:
    """Create a background run on a fresh thread, then join it (event-driven, no polling)."""
    thread_id = str(uuid.uuid4())
    started = time.perf_counter()
    response = await target.client.post(
        f"/threads/{thread_id}/runs", json=_run_body(target, if_not_exists="create")
    )
    if response.status_code != 200:
        sample.failed(f"create HTTP {response.status_code}: {response.text[:300]}")
        return
    run_id = response.json()["run_id"]
    created = time.perf_counter()
    joined = await target.client.get(f"/threads/{thread_id}/runs/{run_id}/join")
    if time.perf_counter() - started > SLOW_RUN_SECONDS:
        # A stall is worth a closer look in the server's log: say which run and which call.
        log.warning(
            "bench_slow_run run_id=%s thread_id=%s create_ms=%.0f join_ms=%.0f",
            run_id,
            thread_id,
            (created - started) * 1000,
            (time.perf_counter() - created) * 1000,
        )
    failure = _join_failure(joined)
    if failure:
        sample.failed(failure)
        return
    sample.latencies.append(time.perf_counter() - started)


async def wait_run(target: Target, sample: Sample) -> None:
    """One stateless POST /runs/wait, timed from send to the whole result received."""
    started = time.perf_counter()
    response = await target.client.post("/runs/wait", json=_run_body(target))
    elapsed = time.perf_counter() - started
    if response.status_code != 200:
        sample.failed(f"wait HTTP {response.status_code}: {response.text[:300]}")
        return
    error = _result_error(json.loads(response.content or b"null"))
    if error:
        sample.failed(error)
        return
    sample.latencies.append(elapsed)


async def stream_run(target: Target, first: Sample, done: Sample) -> None:
    """One stateless POST /runs/stream: time to the first SSE event and to the end of the stream."""
    started = time.perf_counter()
    first_at: float | None = None
    error: str | None = None
    body = _run_body(target, stream_mode=["values"])
    async with target.client.stream("POST", "/runs/stream", json=body) as response:
        if response.status_code != 200:
            await response.aread()
            first.failed(f"stream HTTP {response.status_code}: {response.text[:300]}")
            return
        event = ""
        async for line in response.aiter_lines():
            if first_at is None and line.startswith(("event:", "data:")):
                first_at = time.perf_counter()
            if line.startswith("event:"):
                event = line[6:].strip()
            elif line.startswith("data:") and event == "error":
                error = f"error event: {line[5:].strip()[:300]}"
    ended = time.perf_counter()
    if first_at is None or error:
        first.failed(error or "stream ended without any event")
        return
    first.latencies.append(first_at - started)
    done.latencies.append(ended - started)


async def throughput(target: Target, runs: int) -> dict[str, Any]:
    """Background runs with `concurrency` in flight: runs finished per second."""
    sample = Sample()
    started = time.perf_counter()
    await in_parallel(runs, target.concurrency, lambda: background_run(target, sample))
    elapsed = time.perf_counter() - started
    return {
        "runs_per_s": round(len(sample.latencies) / elapsed, 2),
        "total": len(sample.latencies),
        "errors": len(sample.errors),
        "concurrency": target.concurrency,
        "elapsed_s": round(elapsed, 3),
        **{f"run_{k}": v for k, v in summary(sample).items() if k.endswith("_ms")},
        "run_max_ms": round(max(sample.latencies, default=float("nan")) * 1000, 2),
    }


async def wait_latency(target: Target, runs: int) -> dict[str, Any]:
    """/runs/wait latency one at a time, then with `concurrency` at once."""
    sequential, concurrent = Sample(), Sample()
    for _ in range(runs):
        await wait_run(target, sequential)
    await in_parallel(runs, target.concurrency, lambda: wait_run(target, concurrent))
    return {
        "sequential": summary(sequential),
        "concurrent": {"concurrency": target.concurrency, **summary(concurrent)},
        "errors": len(sequential.errors) + len(concurrent.errors),
    }


async def stream_latency(target: Target, runs: int) -> dict[str, Any]:
    """Time to first SSE event (and to the stream's end) alone, then `concurrency` at once."""
    alone_first, alone_done = Sample(), Sample()
    for _ in range(runs):
        await stream_run(target, alone_first, alone_done)
    many_first, many_done = Sample(), Sample()
    await in_parallel(runs, target.concurrency, lambda: stream_run(target, many_first, many_done))
    return {
        "alone": {**summary(alone_first), "end_p50_ms": _p50_ms(alone_done)},
        "concurrent": {
            "concurrency": target.concurrency,
            **summary(many_first),
            "end_p50_ms": _p50_ms(many_done),
        },
        "errors": len(alone_first.errors) + len(many_first.errors),
    }


async def sleepers(target: Target, runs: int) -> dict[str, Any]:
    """`runs` background runs that each sleep 1 s, submitted as fast as possible; then joined.

    `concurrency` submissions are in flight at once and the submit lanes never join. Once the
    last submission is answered, `JOIN_LANES` long-polling joins take all the runs in turn;
    the last join returning is when the last run finished, as the client sees it.
    """
    if not target.urls:
        raise RuntimeError("sleepers opens a client of its own: the target needs its URLs")
    sample = Sample()
    submitted: list[tuple[str, str]] = []
    succeeded = 0
    last_submitted = last_joined = 0.0
    # The scenario's own client: the shared one has too few connections for the joins.
    async with open_client(target.urls, max(target.concurrency, JOIN_LANES) + 5) as client:

        async def submit() -> None:
            nonlocal last_submitted
            thread_id = str(uuid.uuid4())
            body = _run_body(target, if_not_exists="create")
            response = await client.post(f"/threads/{thread_id}/runs", json=body)
            last_submitted = time.perf_counter()
            if response.status_code != 200:
                sample.failed(f"create HTTP {response.status_code}: {response.text[:300]}")
                return
            submitted.append((thread_id, response.json()["run_id"]))

        async def join() -> None:
            nonlocal last_joined, succeeded
            thread_id, run_id = next(joining)
            joined = await client.get(f"/threads/{thread_id}/runs/{run_id}/join")
            last_joined = time.perf_counter()
            failure = _join_failure(joined)
            if failure:
                sample.failed(failure)
                return
            succeeded += 1

        started = time.perf_counter()
        await in_parallel(runs, target.concurrency, submit)
        joining = iter(submitted)  # in submission order: the oldest runs end first
        await in_parallel(len(submitted), JOIN_LANES, join)
    return {
        "total": succeeded,
        "errors": len(sample.errors),
        "concurrency": target.concurrency,
        "join_lanes": JOIN_LANES,
        "sleep_s": SLEEP_SECONDS,
        "submit_s": round(last_submitted - started, 3),
        "done_after_last_submit_s": (
            round(last_joined - last_submitted, 3) if last_joined >= last_submitted else None
        ),
        "elapsed_s": round(max(last_joined, last_submitted) - started, 3),
    }


def scenario_target(target: Target, name: str) -> Target:
    """The target a scenario (and its warm-up) runs: sleepers runs `sleepy` whatever is asked."""
    if name == "sleepers":
        return replace(target, assistant_id=SLEEPY, input=dict(SLEEPY_INPUT))
    return target


def _p50_ms(sample: Sample) -> float:
    return round(percentile(sample.latencies, 50) * 1000, 2)


async def warm_up(target: Target, runs: int) -> None:
    """A few unmeasured runs so graph loading and connection set-up do not count."""
    sample = Sample()
    for _ in range(runs):
        await wait_run(target, sample)
        if sample.errors:
            raise RuntimeError(f"warm-up run failed: {sample.errors[0]}")


SCENARIOS: dict[str, tuple[Callable[[Target, int], Awaitable[dict[str, Any]]], int]] = {
    "throughput": (throughput, 500),
    "wait": (wait_latency, 200),
    "stream": (stream_latency, 200),
    "sleepers": (sleepers, 200),
}

# Runs each scenario's measured part makes, per `runs`: wait and stream have two legs. The
# server's cost is divided by that; a scenario missing here (recovery) gets no cost figures.
MEASURED_RUNS_PER_LEG: dict[str, int] = {
    "throughput": 1,
    "wait": 2,
    "stream": 2,
    "sleepers": 1,
    "joins": 1,
}
