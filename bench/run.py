"""`python -m bench.run`: run the benchmark scenarios against a URL, or a server it starts."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
import time
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import httpx

from bench.scenarios import SCENARIOS, Target, warm_up

log = logging.getLogger("bench")


def main(argv: list[str] | None = None) -> int:
    """Parse the command line, run the chosen scenarios, print one JSON line per scenario."""
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(message)s")
    # One line per request would drown the figures; failures are logged by the scenarios.
    logging.getLogger("httpx").setLevel(logging.WARNING)
    with _server(args) as url:
        failures = asyncio.run(_run_all(args, url, args.start or "external"))
    return 1 if failures else 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__)
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--url", help="base URL of a running Agent Protocol server")
    where.add_argument(
        "--start", choices=["dev", "serve"], help="start a Runyard server on a free port first"
    )
    parser.add_argument("--scenario", choices=["all", *SCENARIOS], default="all")
    parser.add_argument(
        "--runs", type=_positive, default=None, help="runs per leg (default per scenario)"
    )
    parser.add_argument("--concurrency", type=_positive, default=10, help="requests in flight")
    parser.add_argument("--assistant", default="noop", help="assistant id or graph id to run")
    parser.add_argument(
        "--input", type=json.loads, default={"n": 0}, help='graph input as JSON (default {"n": 0})'
    )
    parser.add_argument(
        "--warmup", type=_non_negative, default=3, help="unmeasured runs before each scenario"
    )
    parser.add_argument(
        "--timeout", type=float, default=120.0, help="give up on a scenario after this many seconds"
    )
    return parser


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def _non_negative(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError("must be 0 or more")
    return value


def _server(args: argparse.Namespace) -> AbstractContextManager[str]:
    if args.url:
        return nullcontext(args.url.rstrip("/"))
    from bench.target import started_server

    return started_server(args.start)


async def _run_all(args: argparse.Namespace, url: str, mode: str) -> int:
    names = list(SCENARIOS) if args.scenario == "all" else [args.scenario]
    limit = args.concurrency + 5
    # trust_env=False: a proxy from the environment must not sit between us and the target.
    async with httpx.AsyncClient(
        base_url=url,
        timeout=httpx.Timeout(60.0),
        limits=httpx.Limits(max_connections=limit, max_keepalive_connections=limit),
        trust_env=False,
    ) as client:
        target = Target(client, args.assistant, args.input, args.concurrency)
        failures = 0
        for name in names:
            line = await _run_one(target, name, args, url, mode)
            print(json.dumps(line), flush=True)
            failures += 1 if line.get("errors") else 0
        return failures


async def _run_one(
    target: Target, name: str, args: argparse.Namespace, url: str, mode: str
) -> dict[str, Any]:
    scenario, default_runs = SCENARIOS[name]
    runs = args.runs or default_runs
    head: dict[str, Any] = {
        "scenario": name,
        "target": url,
        "mode": mode,
        "assistant": target.assistant_id,
    }
    # The client shares this machine with the server: a busy host explains noisy figures.
    head["host_load_1m"] = round(os.getloadavg()[0], 2)
    log.info("bench_scenario_started scenario=%s runs=%s", name, runs)
    started = time.perf_counter()
    try:
        async with asyncio.timeout(args.timeout):
            await warm_up(target, args.warmup)
            figures = await scenario(target, runs)
    except (TimeoutError, RuntimeError, httpx.HTTPError) as exc:
        log.error("bench_scenario_failed scenario=%s error=%r", name, exc)
        return {**head, "errors": 1, "failure": repr(exc)[:500]}
    log.info("bench_scenario_done scenario=%s wall_s=%.1f", name, time.perf_counter() - started)
    return {**head, "runs": runs, **figures}


if __name__ == "__main__":
    raise SystemExit(main())
