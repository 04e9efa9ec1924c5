"""Crons on two `runyard serve` instances: each occurrence makes exactly one run, no backfill."""

from __future__ import annotations

import asyncio
import signal
from collections import Counter
from datetime import datetime
from typing import Any

import pytest

from tests.chaos.cluster import Cluster, wait_terminal, wait_until

EVERY_SECOND = "* * * * * *"


async def cron_runs(cluster: Cluster, thread_id: str) -> list[dict[str, Any]]:
    """Every run of the thread, read through a live instance."""
    runs = await cluster.live().client.runs.list(thread_id, limit=1000)
    return [dict(run) for run in runs]


def occurrences(runs: list[dict[str, Any]]) -> Counter[str]:
    """How many runs each scheduled occurrence produced."""
    return Counter(run["metadata"]["cron_scheduled_for"] for run in runs)


async def start_cron(cluster: Cluster) -> tuple[str, str]:
    """A thread, and a per-second cron on it created through the second instance."""
    first, second = cluster.instances[0], cluster.instances[1]
    thread = await first.client.threads.create()
    cron = await second.client.crons.create_for_thread(
        thread["thread_id"], "short", schedule=EVERY_SECOND, input={"delay": 0.01}
    )
    return str(thread["thread_id"]), str(cron["cron_id"])


@pytest.mark.slow
@pytest.mark.timeout(120)
async def test_each_occurrence_makes_exactly_one_run_across_instances(cluster: Cluster) -> None:
    """Both schedulers poll the same cron every second; every occurrence fires once."""
    thread_id, cron_id = await start_cron(cluster)
    await asyncio.sleep(6)
    await cluster.instances[0].client.crons.update(cron_id, enabled=False)
    await asyncio.sleep(1)  # a firing claimed just before the update lands meanwhile

    runs = await cron_runs(cluster, thread_id)
    counts = occurrences(runs)
    assert len(counts) >= 4, f"the cron fired only {len(counts)} times in 6 s\n{cluster.tails()}"
    duplicated = {when: n for when, n in counts.items() if n != 1}
    assert not duplicated, f"occurrences with several runs: {duplicated}"
    assert {run["metadata"]["cron_id"] for run in runs} == {cron_id}

    claims = cluster.sql(
        "SELECT scheduled_for, run_id, claimed_by FROM cron_firings WHERE cron_id = %s", cron_id
    )
    assert len(claims) == len(counts), "every claim made one run and every run has a claim"
    assert {row[1] for row in claims} == {run["run_id"] for run in runs}
    assert all(row[1] is not None for row in claims)
    by_instance = Counter(row[2].rsplit(":", 1)[0] for row in claims)
    print(f"occurrences fired: {len(counts)}, claims by instance: {dict(by_instance)}")

    statuses = await wait_terminal(cluster, [(thread_id, run["run_id"]) for run in runs], 30)
    assert set(statuses.values()) == {"success"}, statuses


@pytest.mark.slow
@pytest.mark.timeout(120)
async def test_after_a_pause_a_cron_fires_once_instead_of_catching_up(cluster: Cluster) -> None:
    """Every instance frozen for 4 s: on waking the missed seconds fire once, not four times."""
    thread_id, cron_id = await start_cron(cluster)
    await wait_until(
        lambda: _has_runs(cluster, thread_id, 2), 15, "the cron to fire before the pause"
    )
    for instance in cluster.instances:
        instance.signal(signal.SIGSTOP)
    paused_at = _database_now(cluster)
    await asyncio.sleep(4)
    resumed_at = _database_now(cluster)
    for instance in cluster.instances:
        instance.signal(signal.SIGCONT)
    await asyncio.sleep(3)
    await cluster.instances[0].client.crons.update(cron_id, enabled=False)
    await asyncio.sleep(1)

    runs = await cron_runs(cluster, thread_id)
    counts = occurrences(runs)
    assert all(n == 1 for n in counts.values()), counts
    missed = [
        when
        for when in counts
        if paused_at.timestamp() + 1 < datetime.fromisoformat(when).timestamp()
        and datetime.fromisoformat(when).timestamp() < resumed_at.timestamp()
    ]
    # The four seconds frozen hold 3 whole occurrences; on waking only the latest one fires.
    assert len(missed) <= 1, f"missed occurrences were backfilled: {sorted(missed)}"
    after = [w for w in counts if datetime.fromisoformat(w).timestamp() > resumed_at.timestamp()]
    assert len(after) >= 2, f"the cron did not go back to its schedule: {sorted(counts)}"


async def _has_runs(cluster: Cluster, thread_id: str, count: int) -> bool:
    return len(await cron_runs(cluster, thread_id)) >= count


def _database_now(cluster: Cluster) -> datetime:
    value = cluster.sql("SELECT now()")[0][0]
    assert isinstance(value, datetime)
    return value
