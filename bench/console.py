"""What one open operator console costs a running Runyard instance: SQL statements a second
and the server's CPU (from its /metrics), idle and under the bench's throughput load, each
with and without one console following /console/api/live. Prints one JSON line.

    python -m bench.console --url http://127.0.0.1:8123 --token <RUNYARD_CONSOLE_TOKEN> \
        [--seconds 25] [--load]

The server must serve the console (`runyard dev`, or `serve` with RUNYARD_CONSOLE_TOKEN) and
answer /metrics without a token. Under load, the phases' throughput differs from one to the
other on a shared machine: compare the per-run figures, and run it twice in both orders.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import time
from typing import Any

import httpx

from bench.cost import Snapshot, scrape

EXECUTED = "runyard_run_execution_seconds_count"


async def _follow(url: str, token: str, stop: asyncio.Event, frames: list[int]) -> None:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with (
        httpx.AsyncClient(timeout=None, trust_env=False) as http,
        http.stream("GET", url + "/console/api/live", headers=headers) as live,
    ):
        live.raise_for_status()
        async for line in live.aiter_lines():
            frames[0] += line.startswith("event: snapshot")
            if stop.is_set():
                return


def _runs_executed(url: str) -> float:
    """Runs this instance has executed (the count of runyard_run_execution_seconds)."""
    text = httpx.get(url + "/metrics", timeout=10, trust_env=False).text
    counts = [line for line in text.splitlines() if line.startswith(EXECUTED)]
    return sum(float(line.rsplit(" ", 1)[1]) for line in counts)


async def _phase(url: str, seconds: float, load: bool) -> dict[str, Any]:
    bench = None
    if load:
        command = [sys.executable, "-m", "bench.run", "--url", url, "--scenario", "throughput"]
        command += ["--runs", "1000000", "--timeout", str(seconds + 60)]
        # The load runs beside this loop for the whole phase, and is killed at its end.
        bench = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # noqa: ASYNC220
        await asyncio.sleep(5)
    [before], runs_before = await scrape([url]), await asyncio.to_thread(_runs_executed, url)
    started = time.monotonic()
    await asyncio.sleep(seconds)
    [after], runs_after = await scrape([url]), await asyncio.to_thread(_runs_executed, url)
    elapsed = time.monotonic() - started
    if bench is not None:
        bench.kill()
        bench.wait()
        await asyncio.sleep(3)
    return _figures(before, after, elapsed, runs_after - runs_before)


def _figures(
    before: Snapshot | None, after: Snapshot | None, elapsed: float, runs: float
) -> dict[str, Any]:
    if before is None or after is None or before.cpu_s is None or after.cpu_s is None:
        return {"error": "the server's /metrics gave no cost figures"}
    statements = sum(after.statements.values()) - sum(before.statements.values())
    cpu = after.cpu_s - before.cpu_s
    figures: dict[str, Any] = {
        "statements_per_s": round(statements / elapsed, 1),
        "cpu_percent": round(100 * cpu / elapsed, 1),
        "runs_per_s": round(runs / elapsed, 1),
    }
    if runs:
        figures["statements_per_run"] = round(statements / runs, 2)
        figures["cpu_ms_per_run"] = round(1000 * cpu / runs, 2)
    return figures


async def measure(url: str, token: str, seconds: float, load: bool) -> dict[str, Any]:
    """The phases: without a console, then with one open (idle, then under load if asked)."""
    report: dict[str, Any] = {"scenario": "console", "seconds": seconds}
    report["idle_no_console"] = await _phase(url, seconds, False)
    if load:
        report["load_no_console"] = await _phase(url, seconds, True)
    stop, frames = asyncio.Event(), [0]
    follower = asyncio.create_task(_follow(url, token, stop, frames))
    await asyncio.sleep(3)
    report["idle_one_console"] = await _phase(url, seconds, False)
    if load:
        report["load_one_console"] = await _phase(url, seconds, True)
    stop.set()
    follower.cancel()
    report["snapshots_received"] = frames[0]
    return report


def main() -> None:
    """Parse the arguments, measure, print one JSON line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--token", default="")
    parser.add_argument("--seconds", type=float, default=25.0)
    parser.add_argument("--load", action="store_true", help="also under the throughput scenario")
    args = parser.parse_args()
    report = asyncio.run(measure(args.url.rstrip("/"), args.token, args.seconds, args.load))
    print(json.dumps(report))


if __name__ == "__main__":
    main()
