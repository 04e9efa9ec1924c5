"""The chaos scenario: faults production sees, each measured by what it did to runs in flight.

For each fault (a rolling SIGTERM of every instance, a PostgreSQL restart, a SIGKILL) runs of
bench/graphs/steps.py are started, the fault is injected once every run is past its first
step, and the scenario waits for every run to end. One figure set per fault: runs lost (not
ended within the timeout), runs failed by the fault (ended other than `success`), steps
executed twice (a step that finished more than once: its side effect repeated), and the time
to recover (from the fault until the last run in flight ended).
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

from bench.scenarios import Fleet, Target

log = logging.getLogger("bench")

GRAPH = "steps"
TERMINAL = frozenset({"success", "error", "interrupted", "timeout"})
# Runs of 14 s for the rolling restart: longer than the default lease (8 s), within the drain.
ROLLING_STEP_S = 2.8
STEP_S = 1.0
OUTAGE_S = 3.5


class ChaosFleet(Fleet, Protocol):
    """A fleet that can also be SIGTERMed and whose PostgreSQL can be restarted."""

    def terminate(self, index: int) -> None:
        """SIGTERM one instance and wait until it exits."""
        ...

    def restart_database(self, outage_s: float) -> None:
        """Stop the deployment's own PostgreSQL server at once, and start it after `outage_s`."""
        ...


RunRef = tuple[str, str, str]  # (base URL it was created on, thread id, run id)


async def chaos(target: Target, runs: int) -> dict[str, Any]:
    """Every fault in turn; `faults` holds one line of figures each."""
    fleet: Any = target.fleet
    if fleet is None or len(fleet.urls) < 2 or not hasattr(fleet, "restart_database"):
        raise RuntimeError("chaos injects faults: use --start redis --instances 2 (or more)")
    folder = Path(tempfile.mkdtemp(prefix="runyard-bench-chaos-"))
    async with httpx.AsyncClient(timeout=httpx.Timeout(30.0), trust_env=False) as http:
        chaos_run = _Chaos(http, fleet, folder, target.timeout)
        faults = [
            await chaos_run.rolling_sigterm(runs),
            await chaos_run.postgres_restart(runs),
            await chaos_run.sigkill(runs),
        ]
    return {"graph": GRAPH, "faults": faults}


class _Chaos:
    def __init__(self, http: httpx.AsyncClient, fleet: ChaosFleet, folder: Path, timeout: float):
        self._http = http
        self._fleet = fleet
        self._log = folder / "steps.log"
        self._timeout = timeout

    async def rolling_sigterm(self, runs: int) -> dict[str, Any]:
        """SIGTERM each instance in turn while it executes runs, starting it again after."""
        refs: list[RunRef] = []
        started = time.perf_counter()
        for index in range(len(self._fleet.urls)):
            batch = await self._start(runs, ROLLING_STEP_S)
            refs += batch
            await asyncio.to_thread(self._fleet.terminate, index)
            await asyncio.to_thread(self._fleet.restart, index)
        return await self._figures("sigterm_rolling", refs, started, ROLLING_STEP_S)

    async def postgres_restart(self, runs: int) -> dict[str, Any]:
        """Stop PostgreSQL at once for OUTAGE_S, as a crash and restart would."""
        refs = await self._start(runs, STEP_S)
        started = time.perf_counter()
        await asyncio.to_thread(self._fleet.restart_database, OUTAGE_S)
        return await self._figures("postgres_restart", refs, started, STEP_S)

    async def sigkill(self, runs: int) -> dict[str, Any]:
        """SIGKILL the instance executing the most runs; an orchestrator starts it again."""
        refs = await self._start(runs, STEP_S)
        holders = Counter(self._holder(run_id) for _, _, run_id in refs)
        pid = holders.most_common(1)[0][0]
        victim = self._fleet.index_of(pid) if pid is not None else None
        if victim is None:
            raise RuntimeError(f"process {pid} executing the runs is none of the instances")
        started = time.perf_counter()
        await asyncio.to_thread(self._fleet.kill, victim)
        await asyncio.to_thread(self._fleet.restart, victim)
        return await self._figures("sigkill", refs, started, STEP_S)

    async def _start(self, runs: int, delay: float) -> list[RunRef]:
        """`runs` runs spread over the instances, returned once each finished a step."""
        urls = self._fleet.urls
        refs: list[RunRef] = []
        for number in range(runs):
            url, thread_id = urls[number % len(urls)], str(uuid.uuid4())
            body = {
                "assistant_id": GRAPH,
                "input": {"log": str(self._log), "delay": delay},
                "if_not_exists": "create",
            }
            created = await self._http.post(f"{url}/threads/{thread_id}/runs", json=body)
            created.raise_for_status()
            refs.append((url, thread_id, created.json()["run_id"]))
        deadline = time.perf_counter() + self._timeout
        while not all(self._done_steps(run_id) for _, _, run_id in refs):
            if time.perf_counter() > deadline:
                raise RuntimeError("the chaos runs did not start")
            await asyncio.sleep(0.1)
        return refs

    async def _figures(
        self, fault: str, refs: list[RunRef], started: float, step_s: float
    ) -> dict[str, Any]:
        statuses = await self._wait_ended(refs)
        recovered = time.perf_counter() - started
        lines = self._lines()
        twice = 0
        for _, _, run_id in refs:
            counts = Counter(
                line["node"]
                for line in lines
                if line["run_id"] == run_id and line["phase"] == "done"
            )
            twice += sum(count - 1 for count in counts.values() if count > 1)
        ended = Counter(statuses.values())
        figures = {
            "fault": fault,
            "runs": len(refs),
            "run_s": round(step_s * 5, 1),
            "runs_lost": sum(1 for s in statuses.values() if s not in TERMINAL),
            "runs_failed": sum(n for s, n in ended.items() if s in TERMINAL and s != "success"),
            "steps_executed_twice": twice,
            "time_to_recover_s": round(recovered, 2),
            "statuses": dict(ended),
        }
        log.info("bench_chaos_fault %s", json.dumps(figures))
        return figures

    async def _wait_ended(self, refs: list[RunRef]) -> dict[str, str]:
        """Run id → status once every run ended, or at the timeout (unended runs are lost)."""
        seen = {run_id: "unknown" for _, _, run_id in refs}
        deadline = time.perf_counter() + self._timeout
        while time.perf_counter() < deadline:
            for _, thread_id, run_id in refs:
                if seen[run_id] in TERMINAL:
                    continue
                seen[run_id] = await self._status(thread_id, run_id) or seen[run_id]
            if all(status in TERMINAL for status in seen.values()):
                break
            await asyncio.sleep(0.2)
        return seen

    async def _status(self, thread_id: str, run_id: str) -> str | None:
        for url in self._fleet.urls:
            try:
                response = await self._http.get(f"{url}/threads/{thread_id}/runs/{run_id}")
            except httpx.HTTPError:
                continue
            if response.status_code == 200:
                return str(response.json()["status"])
        return None

    def _lines(self) -> list[dict[str, Any]]:
        if not self._log.exists():
            return []
        out = []
        for raw in self._log.read_text().splitlines():
            try:
                out.append(json.loads(raw))
            except json.JSONDecodeError:
                continue
        return out

    def _done_steps(self, run_id: str) -> int:
        return sum(
            1 for line in self._lines() if line["run_id"] == run_id and line["phase"] == "done"
        )

    def _holder(self, run_id: str) -> int | None:
        mine = [line for line in self._lines() if line["run_id"] == run_id]
        return int(mine[-1]["pid"]) if mine else None
