"""PostgreSQL restarts or kills connections mid-run: no run fails for it, no step runs twice."""

from __future__ import annotations

import asyncio
import time

import pytest

from tests.chaos.cluster import (
    DEFAULT_ENV,
    Cluster,
    ClusterFactory,
    RunRef,
    concurrent_attempts,
    done_counts,
    lines_of,
    steps_done_twice,
    submit,
    wait_terminal,
    wait_until,
)
from tests.support.throwaway import ThrowawayPostgres

RUNS = 16
STEP_DELAY = 1.0
OUTAGE = 3.5  # seconds, as the reported restart


async def start_load(cluster: Cluster) -> list[RunRef]:
    """RUNS runs of five 1 s steps, spread over the instances, each past its first step."""
    refs: list[RunRef] = []
    for index in range(RUNS):
        instance = cluster.instances[index % len(cluster.instances)]
        refs.append(await submit(instance, "steps", cluster.steps_input(STEP_DELAY)))
    await wait_until(
        lambda: all(lines_of(cluster.log_lines(), run_id, phase="done") for _, run_id in refs),
        40,
        "every run to finish a step",
    )
    return refs


def assert_unharmed(cluster: Cluster, refs: list[RunRef], final: dict[str, str]) -> None:
    """Every run succeeded, each step's side effect once, no two attempts side by side."""
    assert set(final.values()) == {"success"}, f"{final}\n{cluster.tails()}"
    lines = cluster.log_lines()
    for _, run_id in refs:
        assert done_counts(lines, run_id) == {f"s{i}": 1 for i in range(1, 6)}, lines_of(
            lines, run_id
        )
        assert not concurrent_attempts(lines, run_id), lines_of(lines, run_id)
    assert sum(steps_done_twice(lines, run_id) for _, run_id in refs) == 0


@pytest.mark.slow
@pytest.mark.timeout(150)
async def test_postgres_restart_under_load_fails_no_run(
    cluster_factory: ClusterFactory, throwaway_postgres: ThrowawayPostgres
) -> None:
    """Stop PostgreSQL at once (as a crash) for a few seconds while runs execute."""
    cluster = await cluster_factory(2, postgres=throwaway_postgres, **DEFAULT_ENV)
    refs = await start_load(cluster)
    await asyncio.to_thread(throwaway_postgres.stop)
    stopped_at = time.monotonic()
    await asyncio.sleep(OUTAGE)
    await asyncio.to_thread(throwaway_postgres.start)
    final = await wait_terminal(cluster, refs, timeout=90)
    assert_unharmed(cluster, refs, final)
    assert all(instance.alive() for instance in cluster.instances)
    print(
        f"postgres restart: {RUNS} runs, outage {OUTAGE:g}s, "
        f"all success {time.monotonic() - stopped_at:.1f}s after the stop"
    )


@pytest.mark.slow
@pytest.mark.timeout(150)
async def test_killed_database_connections_fail_no_run(cluster_factory: ClusterFactory) -> None:
    """pg_terminate_backend every connection of the instances, twice, while runs execute."""
    cluster = await cluster_factory(2, **DEFAULT_ENV)
    refs = await start_load(cluster)
    killed = 0
    for _ in range(2):
        rows = cluster.sql(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        killed += sum(1 for (done,) in rows if done)
        await asyncio.sleep(1.5)
    assert killed > 0
    final = await wait_terminal(cluster, refs, timeout=90)
    assert_unharmed(cluster, refs, final)
    print(f"pg_terminate_backend: {killed} connections killed, {RUNS} runs all success")
