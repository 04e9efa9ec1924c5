"""The recovery scenario: SIGKILL the instance executing a run, time until it goes on elsewhere."""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx

from bench.scenarios import Fleet, Target, percentile

log = logging.getLogger("bench")

GRAPH = "sleeper"
NAP_SECONDS = 5.0
TERMINAL = frozenset({"success", "error", "interrupted", "timeout"})


class RecoveryFailed(Exception):
    """A repetition that did not end with the run recovered and succeeded."""


@dataclass
class SseEvent:
    """One server-sent event."""

    id: str
    event: str
    data: str


@dataclass
class Recovered:
    """Seconds from the SIGKILL until the later attempt's metadata event, and until success."""

    continued_s: float
    succeeded_s: float
    attempt: int


async def sse_events(response: httpx.Response) -> AsyncIterator[SseEvent]:
    """Parse an SSE body into events (comments, i.e. keep-alive pings, are skipped)."""
    event_id, event = "", ""
    data: list[str] = []
    async for line in response.aiter_lines():
        if not line:
            if event or data:
                yield SseEvent(event_id, event or "message", "\n".join(data))
            event, data = "", []
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if name == "id":
            event_id = value
        elif name == "event":
            event = value
        elif name == "data":
            data.append(value)


async def recovery(target: Target, runs: int) -> dict[str, Any]:
    """`runs` times: start a run, SIGKILL its instance mid-run, follow it on a survivor."""
    fleet = target.fleet
    if fleet is None or len(fleet.urls) < 2:
        raise RuntimeError("recovery kills instances: use --start redis --instances 2 (or more)")
    done: list[Recovered] = []
    errors: list[str] = []
    async with httpx.AsyncClient(timeout=httpx.Timeout(30.0), trust_env=False) as http:
        for repetition in range(runs):
            killed: list[int] = []
            try:
                async with asyncio.timeout(target.timeout):
                    done.append(await _kill_and_follow(http, fleet, repetition, killed))
            except (RecoveryFailed, TimeoutError, httpx.HTTPError) as exc:
                log.warning("bench_recovery_failed repetition=%s error=%r", repetition, exc)
                errors.append(repr(exc)[:300])
            for index in killed:
                await asyncio.to_thread(fleet.restart, index)
    return {
        "assistant": GRAPH,
        "nap_s": NAP_SECONDS,
        "instances": len(fleet.urls),
        "recovered": len(done),
        "errors": len(errors),
        "continued": _spread([item.continued_s for item in done]),
        "succeeded": _spread([item.succeeded_s for item in done]),
        "continued_each_s": [round(item.continued_s, 3) for item in done],
        "attempts": [item.attempt for item in done],
        **({"failures": errors} if errors else {}),
    }


def _spread(values: list[float]) -> dict[str, float | None]:
    if not values:
        # null rather than NaN: NaN is not JSON, and no figure is the honest answer.
        return {"median_s": None, "p90_s": None, "max_s": None}
    return {
        "median_s": round(percentile(values, 50), 3),
        "p90_s": round(percentile(values, 90), 3),
        "max_s": round(max(values), 3),
    }


async def _kill_and_follow(
    http: httpx.AsyncClient, fleet: Fleet, repetition: int, killed: list[int]
) -> Recovered:
    urls = fleet.urls
    entry = urls[repetition % len(urls)]
    thread_id = str(uuid.uuid4())
    body = {
        "assistant_id": GRAPH,
        "input": {"sleep": NAP_SECONDS},
        "if_not_exists": "create",
        "stream_resumable": True,
        "stream_mode": ["values"],
    }
    created = await http.post(f"{entry}/threads/{thread_id}/runs", json=body)
    _require(created, "create")
    run_path = f"/threads/{thread_id}/runs/{created.json()['run_id']}"
    pid = await _executor_pid(http, entry, thread_id, run_path)
    victim = fleet.index_of(pid)
    if victim is None:
        raise RecoveryFailed(f"process {pid} that executes the run is none of the instances")
    # The client follows the run on the instance that executes it, as it would behind a
    # balancer, and sees everything up to the nap; then that instance dies under it.
    headers = {"Last-Event-ID": "0"}
    async with http.stream("GET", urls[victim] + run_path + "/stream", headers=headers) as stream:
        _require(stream, "stream on the executing instance")
        last_id = await _id_of_event_with_pid(stream, pid)
        killed_at = time.perf_counter()
        killed.append(victim)
        await asyncio.to_thread(fleet.kill, victim)
    survivor = urls[(victim + 1) % len(urls)]
    resumed = survivor + run_path + "/stream"
    continued_at, attempt = await _follow_until_end(http, resumed, last_id)
    joined = await http.get(survivor + run_path + "/join")
    succeeded_at = time.perf_counter()
    _require(joined, "join")
    run = await http.get(survivor + run_path)
    _require(run, "get run")
    if run.json()["status"] != "success":
        raise RecoveryFailed(f"run ended {run.json()['status']}: {joined.text[:300]}")
    values = joined.json()
    finished_by = values.get("finished_by")
    if finished_by == pid or not isinstance(finished_by, int):
        raise RecoveryFailed(f"finished_by={finished_by!r}, killed pid={pid}")
    if values.get("pid") != pid:
        # Resume, don't restart: the first node completed before the kill and must not re-run.
        raise RecoveryFailed(f"the first node ran again: pid {pid} became {values.get('pid')}")
    log.info(
        "bench_recovered repetition=%s attempt=%s continued_s=%.3f succeeded_s=%.3f",
        repetition,
        attempt,
        continued_at - killed_at,
        succeeded_at - killed_at,
    )
    return Recovered(continued_at - killed_at, succeeded_at - killed_at, attempt)


def _require(response: httpx.Response, what: str) -> None:
    if response.status_code != 200:
        # A streamed response's body is not read; its status says enough.
        body = response.text[:300] if response.is_stream_consumed else ""
        raise RecoveryFailed(f"{what}: HTTP {response.status_code} {body}")


async def _executor_pid(http: httpx.AsyncClient, url: str, thread_id: str, run_path: str) -> int:
    """Poll until the run is running and its first node has recorded its process id."""
    while True:
        run = await http.get(url + run_path)
        _require(run, "get run")
        status = run.json()["status"]
        if status in TERMINAL:
            raise RecoveryFailed(f"the run ended ({status}) before it could be interrupted")
        if status == "running":
            state = await http.get(f"{url}/threads/{thread_id}/state")
            _require(state, "get state")
            pid = (state.json().get("values") or {}).get("pid")
            if isinstance(pid, int):
                return pid
        await asyncio.sleep(0.05)


async def _id_of_event_with_pid(stream: httpx.Response, pid: int) -> str:
    """Read the replayed events up to the `values` event that carries the pid; its id."""
    async for item in sse_events(stream):
        if item.event == "values" and json.loads(item.data).get("pid") == pid:
            return item.id
    raise RecoveryFailed("the stream ended before the event carrying the pid")


async def _follow_until_end(
    http: httpx.AsyncClient, stream_url: str, last_id: str
) -> tuple[float, int]:
    """Resume the stream after `last_id`; when a later attempt's metadata came, and which."""
    continued_at: float | None = None
    attempt = 0
    async with http.stream("GET", stream_url, headers={"Last-Event-ID": last_id}) as stream:
        _require(stream, "stream on a surviving instance")
        async for item in sse_events(stream):
            if item.event == "error":
                raise RecoveryFailed(f"error event: {item.data[:300]}")
            if item.event == "metadata" and continued_at is None:
                attempt = int(json.loads(item.data).get("attempt") or 0)
                if attempt > 1:
                    continued_at = time.perf_counter()
    if continued_at is None:
        raise RecoveryFailed("the stream ended without the metadata event of a later attempt")
    return continued_at, attempt
