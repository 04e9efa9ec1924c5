"""The takeover scenario: SIGKILL the instance executing most runs of a batch, time how soon
each of its runs goes on elsewhere.

`runs` runs of bench/graphs/steps.py (five steps of STEP_S seconds) are spread over the
instances; once every run has finished a step, the instance executing the most is SIGKILLed.
For each of its runs, the figure is the time from the kill to the first step another process
starts for it (read from the steps' log, which every process appends to on this machine);
then the time until every run of the batch ended. The PostgreSQL connections of the
deployment are counted just before the kill, with every run in flight, and divided by the
number of instances.

The runs start a lease after the scenario began (the instances started before it):
an instance judges others by their liveness only once its own liveness session is a lease
old (after its start, or a restart of the database), and the figure is meant for a fleet in
its steady state.

Times are also given as ratios to the lease (LEASE_DURATION_SECONDS): an instance that waits
for a dead instance's leases to expire resumes its runs at about 1 lease or more.
"""

from __future__ import annotations

import asyncio
import json
import logging
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any, Protocol

import httpx

from bench.scenarios import Fleet, Target, percentile

log = logging.getLogger("bench")

GRAPH = "steps"
STEP_S = 2.0
TERMINAL = frozenset({"success", "error", "interrupted", "timeout"})


class TakeoverFleet(Fleet, Protocol):
    """A fleet on a database whose connections can be counted, and whose lease is known."""

    def database_connections(self) -> int:
        """Connections to the deployment's database now (this count's own excluded)."""
        ...

    def lease_seconds(self) -> float:
        """LEASE_DURATION_SECONDS as the instances run it."""
        ...


async def takeover(target: Target, runs: int) -> dict[str, Any]:
    """Start `runs` runs, SIGKILL the instance executing most, follow its runs elsewhere."""
    fleet: Any = target.fleet
    if fleet is None or len(fleet.urls) < 2 or not hasattr(fleet, "database_connections"):
        raise RuntimeError("takeover kills an instance: use --start redis --instances 2")
    began = time.monotonic()
    lease = fleet.lease_seconds()
    steps_log = Path(tempfile.mkdtemp(prefix="runyard-bench-takeover-")) / "steps.log"
    await asyncio.sleep(max(0.0, began + lease - time.monotonic()))
    async with httpx.AsyncClient(timeout=httpx.Timeout(30.0), trust_env=False) as http:
        refs = await _start(http, fleet.urls, steps_log, runs, target.timeout)
        connections = await asyncio.to_thread(fleet.database_connections)
        holders = Counter(_holder(_lines(steps_log), run_id) for _, run_id in refs)
        pid = holders.most_common(1)[0][0]
        victim = fleet.index_of(pid) if pid is not None else None
        if victim is None:
            raise RuntimeError(f"process {pid} executing the runs is none of the instances")
        victim_runs = [run_id for _, run_id in refs if _holder(_lines(steps_log), run_id) == pid]
        killed_at = time.time()
        await asyncio.to_thread(fleet.kill, victim)
        survivors = [url for index, url in enumerate(fleet.urls) if index != victim]
        statuses = await _wait_ended(http, survivors, refs, target.timeout)
        all_done_s = time.time() - killed_at
    lines = _lines(steps_log)
    resumed = [_resumed_after(lines, run_id, pid, killed_at) for run_id in victim_runs]
    seconds = [value for value in resumed if value is not None]
    median = percentile(seconds, 50) if seconds else None
    figures = {
        "graph": GRAPH,
        "step_s": STEP_S,
        "lease_s": lease,
        "victim_runs": len(victim_runs),
        "resumed": len(seconds),
        "resumed_median_s": _round(median),
        "resumed_p90_s": _round(percentile(seconds, 90) if seconds else None),
        "resumed_max_s": _round(max(seconds) if seconds else None),
        "resumed_median_over_lease": _round(median / lease if median is not None else None),
        "all_done_s": round(all_done_s, 2),
        "connections_per_instance": round(connections / len(fleet.urls), 1),
        "steps_done_twice": _done_twice(lines, [run_id for _, run_id in refs]),
        "statuses": dict(Counter(statuses.values())),
        "errors": sum(1 for status in statuses.values() if status != "success")
        + len(victim_runs)
        - len(seconds),
    }
    log.info("bench_takeover %s", json.dumps(figures))
    return figures


async def _start(
    http: httpx.AsyncClient, urls: list[str], steps_log: Path, runs: int, timeout: float
) -> list[tuple[str, str]]:
    """`runs` runs spread over the instances, returned once each finished a step."""
    refs: list[tuple[str, str]] = []
    for number in range(runs):
        url, thread_id = urls[number % len(urls)], str(uuid.uuid4())
        body = {
            "assistant_id": GRAPH,
            "input": {"log": str(steps_log), "delay": STEP_S},
            "if_not_exists": "create",
        }
        created = await http.post(f"{url}/threads/{thread_id}/runs", json=body)
        created.raise_for_status()
        refs.append((thread_id, str(created.json()["run_id"])))
    deadline = time.monotonic() + timeout
    while True:
        lines = _lines(steps_log)
        done = {line["run_id"] for line in lines if line["phase"] == "done"}
        if all(run_id in done for _, run_id in refs):
            return refs
        if time.monotonic() > deadline:
            raise RuntimeError("the takeover runs did not each finish a step in time")
        await asyncio.sleep(0.1)


async def _wait_ended(
    http: httpx.AsyncClient, urls: list[str], refs: list[tuple[str, str]], timeout: float
) -> dict[str, str]:
    """Run id → status once every run ended (or at the timeout: `unknown` is a lost run)."""
    seen = {run_id: "unknown" for _, run_id in refs}
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for thread_id, run_id in refs:
            if seen[run_id] in TERMINAL:
                continue
            try:
                response = await http.get(f"{urls[0]}/threads/{thread_id}/runs/{run_id}")
            except httpx.HTTPError:
                continue
            if response.status_code == 200:
                seen[run_id] = str(response.json()["status"])
        if all(status in TERMINAL for status in seen.values()):
            break
        await asyncio.sleep(0.1)
    return seen


def _resumed_after(
    lines: list[dict[str, Any]], run_id: str, dead_pid: int, killed_at: float
) -> float | None:
    """Seconds from the kill to the first step another process started for the run."""
    starts = [
        line["t"]
        for line in lines
        if line["run_id"] == run_id
        and line["phase"] == "start"
        and line["pid"] != dead_pid
        and line["t"] >= killed_at
    ]
    return min(starts) - killed_at if starts else None


def _done_twice(lines: list[dict[str, Any]], run_ids: list[str]) -> int:
    counts = Counter(
        (line["run_id"], line["node"])
        for line in lines
        if line["phase"] == "done" and line["run_id"] in set(run_ids)
    )
    return sum(count - 1 for count in counts.values() if count > 1)


def _holder(lines: list[dict[str, Any]], run_id: str) -> int | None:
    mine = [line for line in lines if line["run_id"] == run_id]
    return int(mine[-1]["pid"]) if mine else None


def _lines(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    out = []
    for raw in path.read_text().splitlines():
        try:
            out.append(json.loads(raw))
        except json.JSONDecodeError:
            continue
    return out


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)
