"""A rolling deploy with the default timings: every instance SIGTERMed in turn mid-run."""

from __future__ import annotations

import asyncio
import signal

import pytest

from tests.chaos.cluster import (
    DEFAULT_ENV,
    Cluster,
    ClusterFactory,
    Instance,
    RunRef,
    concurrent_attempts,
    done_counts,
    lines_of,
    submit,
    wait_terminal,
    wait_until,
)

# Five steps of 2.8 s: 14 s a run, well past the default lease (8 s), within the drain (30 s).
STEP_DELAY = 2.8


def holder(cluster: Cluster, run_id: str) -> int | None:
    """The pid that logged the run's latest line."""
    mine = lines_of(cluster.log_lines(), run_id)
    return mine[-1]["pid"] if mine else None


async def start_runs_on(cluster: Cluster, victim: Instance, refs: list[RunRef]) -> list[str]:
    """Submit runs until the victim executes at least two; the ids of those it executes."""
    for _ in range(6):
        for index in range(2):
            live = [i for i in cluster.instances if i.alive()]
            refs.append(
                await submit(live[index % len(live)], "steps", cluster.steps_input(STEP_DELAY))
            )
        await wait_until(
            lambda: all(holder(cluster, run_id) for _, run_id in refs), 30, "the runs to start"
        )
        mine = [run_id for _, run_id in refs if holder(cluster, run_id) == victim.pid]
        if len(mine) >= 2:
            return mine
    pytest.fail(f"the victim never executed two runs\n{cluster.tails()}")


@pytest.mark.slow
@pytest.mark.timeout(150)
async def test_rolling_restart_runs_no_step_twice(cluster_factory: ClusterFactory) -> None:
    """SIGTERM each instance in turn while it executes runs longer than the lease.

    Its runs finish on it within the drain: no other instance starts them meanwhile, no
    step runs twice, and every run ends `success`.
    """
    cluster = await cluster_factory(2, **DEFAULT_ENV)
    refs: list[RunRef] = []
    victims: dict[int, list[str]] = {}
    for victim in list(cluster.instances):
        mine = await start_runs_on(cluster, victim, refs)
        victims[victim.pid] = mine
        proc = victim.server.process
        assert proc is not None
        victim.signal(signal.SIGTERM)
        # The deploy brings up the new instance while the old one drains.
        await cluster.replace(victim)
        final = await wait_terminal(cluster, refs, timeout=60)
        assert set(final.values()) == {"success"}, f"{final}\n{cluster.tails()}"
        exit_code = await asyncio.to_thread(proc.wait, 30)
        assert exit_code in (0, -signal.SIGTERM), victim.log_tail()

    lines = cluster.log_lines()
    for _, run_id in refs:
        assert done_counts(lines, run_id) == {f"s{i}": 1 for i in range(1, 6)}, lines_of(
            lines, run_id
        )
        assert not concurrent_attempts(lines, run_id), lines_of(lines, run_id)
    for pid, mine in victims.items():
        for run_id in mine:
            # Within the drain, the draining instance finished what it held.
            assert {line["pid"] for line in lines_of(lines, run_id)} == {pid}, lines_of(
                lines, run_id
            )
    print(
        f"rolling restart: {len(refs)} runs, "
        f"{sum(len(m) for m in victims.values())} held by SIGTERMed instances, all success"
    )
