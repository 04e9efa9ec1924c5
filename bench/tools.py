"""The `tools` scenario: what `runyard.tools.at_most_once` costs per tool call, beside the
same tool unmarked, measured in the same bench run.

Two graphs of bench/graphs/tools.py run the same agent step of four tool calls: `tools_plain`
with an ordinary tool, `tools_marked` with the tool marked at most once. Legs of background
runs of each alternate in rounds, each leg between two scrapes of every instance's metrics,
so both meet the same host conditions. The difference per run, divided by the calls of a
run, is the cost of one marked call: SQL statements, server CPU, and latency (each run's
submit-to-join time, at the median).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from bench import cost
from bench.scenarios import Sample, Target, background_run, in_parallel, percentile

ROUNDS = 10
CALLS_PER_RUN = 4  # bench/graphs/tools.py CALLS
GRAPHS = {"plain": "tools_plain", "marked": "tools_marked"}


async def tool_cost(target: Target, runs: int) -> dict[str, Any]:
    """Statements, CPU and latency per run of each graph, and per marked call."""
    per_leg = max(1, runs // ROUNDS)
    targets = {name: replace(target, assistant_id=g, input={}) for name, g in GRAPHS.items()}
    for leg in targets.values():  # graph loading and first connections, not measured
        await _leg(leg, 2, 1, Sample())
    cpu = {name: 0.0 for name in GRAPHS}
    statements = {name: 0.0 for name in GRAPHS}
    samples = {name: Sample() for name in GRAPHS}
    for _ in range(ROUNDS):
        for name, leg in targets.items():
            before = await cost.scrape(target.urls)
            await _leg(leg, per_leg, target.concurrency, samples[name])
            after = await cost.scrape(target.urls)
            figures = cost.server_cost(before, after, per_leg)
            if figures is None or figures["cpu_ms_per_run"] is None:
                raise RuntimeError("the servers' metrics could not be read")
            cpu[name] += figures["cpu_ms_per_run"] * per_leg
            statements[name] += (figures["statements_per_run"] or {}).get("total", 0) * per_leg
    done = per_leg * ROUNDS
    per_run = {
        name: {
            "statements": round(statements[name] / done, 2),
            "cpu_ms": round(cpu[name] / done, 3),
            "run_p50_ms": round(percentile(samples[name].latencies, 50) * 1000, 2),
        }
        for name in GRAPHS
    }
    plain, marked = per_run["plain"], per_run["marked"]
    return {
        "calls_per_run": CALLS_PER_RUN,
        "plain": plain,
        "marked": marked,
        "per_marked_call": {
            key: round((marked[key] - plain[key]) / CALLS_PER_RUN, 3) for key in plain
        },
        "marked_over_plain": {
            key: round(marked[key] / plain[key], 3) if plain[key] else None for key in plain
        },
        "errors": sum(len(sample.errors) for sample in samples.values()),
        "concurrency": target.concurrency,
    }


async def _leg(target: Target, runs: int, concurrency: int, sample: Sample) -> None:
    await in_parallel(runs, concurrency, lambda: background_run(target, sample))
