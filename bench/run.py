"""`python -m bench.run`: run the benchmark scenarios against URLs, or servers it starts."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import AsyncExitStack, contextmanager
from typing import Any

import httpx

from bench import cost, scenarios
from bench.chaos import chaos
from bench.client import HTTPError, open_client
from bench.fairness import fairness
from bench.idle_readers import idle_readers
from bench.joins import joins
from bench.recovery import recovery
from bench.scenarios import Fleet, Target, scenario_target, warm_up
from bench.session import session_cost
from bench.streams import streams
from bench.takeover import takeover
from bench.tools import tool_cost

log = logging.getLogger("bench")

ScenarioFn = Callable[[Target, int], Awaitable[dict[str, Any]]]

# `all` runs the load scenarios; `recovery`, `takeover` and `chaos` kill instances (chaos also
# restarts PostgreSQL), so they run only when asked for.
SCENARIOS: dict[str, tuple[ScenarioFn, int]] = {
    **scenarios.SCENARIOS,
    "recovery": (recovery, 5),
    # Not in `all`: it measures its own cost, the session beside /runs/stream.
    "session": (session_cost, 200),
    "chaos": (chaos, 8),
    # SIGKILL the instance executing most of a batch: how soon its runs go on elsewhere.
    "takeover": (takeover, 20),
    # Many streaming clients at once (bench/graphs/relay.py); 0: 100, 1,000, 3,000 clients.
    "streams": (streams, 0),
    # Ordinary runs on a thread beside 300 subscribers of it that never read.
    "idle_readers": (idle_readers, 50),
    # A small tenant's waits alone, then behind a big tenant's backlog (bench/fairness.py).
    "fairness": (fairness, 20),
    # Not in `all`: an at-most-once tool call's cost beside an ordinary one (bench/tools.py).
    "tools": (tool_cost, 200),
    # Joins of short runs: how long after its run's end each ends (bench/joins.py).
    "joins": (joins, 20_000),
}
DEFAULT_REDIS = "redis://127.0.0.1:6379/0"


def main(argv: list[str] | None = None) -> int:
    """Parse the command line, run the chosen scenarios, print one JSON line per scenario."""
    parser = _parser()
    args = parser.parse_args(argv)
    _check(parser, args)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(message)s")
    # One line per request would drown the figures; failures are logged by the scenarios.
    logging.getLogger("httpx").setLevel(logging.WARNING)
    with _servers(args) as (urls, settings, fleet):
        with asyncio.Runner(loop_factory=_loop_factory()) as runner:
            failures = runner.run(_run_all(args, urls, settings, fleet))
    return 1 if failures else 0


def _loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's event loop where it is installed (it comes with uvicorn[standard]): the client
    shares the machine with the server, and costs it less CPU on uvloop."""
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__)
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument(
        "--url", help="base URL of a running server; several, comma-separated, are used in turn"
    )
    where.add_argument(
        "--start",
        choices=["dev", "serve", "redis"],
        help="start Runyard on free ports first: dev (SQLite), serve (PostgreSQL), "
        "redis (PostgreSQL + Redis, --instances processes)",
    )
    parser.add_argument(
        "--against",
        metavar="URL",
        help="a second deployment (with --url), loaded at the same moment with the same "
        "scenario, so both meet the same host: one JSON line each",
    )
    parser.add_argument("--instances", type=_positive, default=1, help="with --start redis")
    parser.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a Runyard setting for the started servers (repeatable)",
    )
    parser.add_argument("--redis-url", default=DEFAULT_REDIS, help="Redis for --start redis")
    parser.add_argument("--keep-logs", action="store_true", help="keep the servers' logs")
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
        "--timeout",
        type=float,
        default=120.0,
        help="give up on a scenario (recovery: on one repetition) after this many seconds",
    )
    return parser


def _check(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    if args.instances > 1 and args.start != "redis":
        parser.error("--instances needs --start redis (without Redis there is one instance)")
    if args.against and not args.url:
        parser.error("--against compares two running deployments; it needs --url")
    if args.env and not args.start:
        parser.error("--env sets the started servers' settings; it needs --start")
    for item in args.env:
        if "=" not in item or not item.split("=", 1)[0]:
            parser.error(f"--env {item!r}: expected KEY=VALUE")


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


@contextmanager
def _servers(
    args: argparse.Namespace,
) -> Iterator[tuple[list[str], dict[str, Any] | None, Fleet | None]]:
    """The target URLs, the servers' non-default settings (None: unknown) and what to kill."""
    if args.url:
        yield _urls(args.url), None, None
        return
    from bench.target import started_deployment

    overrides = dict(item.split("=", 1) for item in args.env)
    with started_deployment(
        args.start,
        args.instances,
        overrides,
        args.redis_url,
        args.keep_logs,
        private_postgres=args.scenario == "chaos",
    ) as deployment:
        yield deployment.urls, deployment.effective, deployment


async def _run_all(
    args: argparse.Namespace, urls: list[str], settings: dict[str, Any] | None, fleet: Fleet | None
) -> int:
    names = list(scenarios.SCENARIOS) if args.scenario == "all" else [args.scenario]
    deployments = [urls]
    if args.against:
        deployments.append(_urls(args.against))
    async with AsyncExitStack() as stack:
        targets = []
        for members in deployments:
            client = await stack.enter_async_context(open_client(members, args.concurrency + 5))
            target = Target(
                client, args.assistant, args.input, args.concurrency, args.timeout, fleet, members
            )
            head: dict[str, Any] = {
                "target": ",".join(members),
                "mode": args.start or "external",
                "instances": len(members),
                "settings": settings,
            }
            if args.against:
                head["side_by_side"] = True
            targets.append((target, head))
        failures = 0
        for name in names:
            # Side by side, both deployments take the scenario at once: same host, same moment.
            lines = await asyncio.gather(
                *(_run_one(target, name, args, head) for target, head in targets)
            )
            for line in lines:
                # Chaos: one line per fault, each with the scenario's head.
                faults = line.pop("faults", None)
                for item in faults if faults is not None else [{}]:
                    out = {**line, **item}
                    print(json.dumps(out), flush=True)
                    failures += 1 if out.get("errors") or out.get("runs_failed") else 0
        return failures


def _urls(text: str) -> list[str]:
    return [url.strip().rstrip("/") for url in text.split(",") if url.strip()]


async def _run_one(
    target: Target, name: str, args: argparse.Namespace, common: dict[str, Any]
) -> dict[str, Any]:
    scenario, default_runs = SCENARIOS[name]
    runs = args.runs or default_runs
    target = scenario_target(target, name)
    head: dict[str, Any] = {"scenario": name, **common, "assistant": target.assistant_id}
    # The client shares this machine with the server: a busy host explains noisy figures.
    head["host_load_1m"] = round(os.getloadavg()[0], 2)
    # Recovery restarts an instance after each repetition; --timeout bounds one repetition.
    budget = args.timeout * (runs + 1) if name == "recovery" else args.timeout
    if name == "chaos":
        # Three faults, the rolling one an instance at a time.
        budget = args.timeout * 6
    if name == "streams":
        # Three levels, each waiting up to five timeouts for its slowest stream.
        budget = args.timeout * 16
    if name == "joins":
        # Thousands of runs one after another in each lane: a tenth of a second each.
        budget = args.timeout + runs * 0.1
    # Recovery restarts instances and is about time, not cost: it has no per-run figures.
    per_leg = scenarios.MEASURED_RUNS_PER_LEG.get(name)
    log.info("bench_scenario_started scenario=%s runs=%s", name, runs)
    started = time.perf_counter()
    try:
        async with asyncio.timeout(budget):
            await warm_up(target, args.warmup)
            # Every instance, before and after the measured part: the server's cost per run.
            before = await cost.scrape(target.urls) if per_leg else []
            figures = await scenario(target, runs)
            after = await cost.scrape(target.urls) if per_leg else []
    except (TimeoutError, RuntimeError, HTTPError, httpx.HTTPError) as exc:
        log.error("bench_scenario_failed scenario=%s error=%r", name, exc)
        return {**head, "errors": 1, "failure": repr(exc)[:500], "server": None}
    log.info("bench_scenario_done scenario=%s wall_s=%.1f", name, time.perf_counter() - started)
    head["host_load_1m_end"] = round(os.getloadavg()[0], 2)
    server = cost.server_cost(before, after, runs * per_leg) if per_leg else None
    return {**head, "runs": runs, **figures, "server": server}


if __name__ == "__main__":
    raise SystemExit(main())
