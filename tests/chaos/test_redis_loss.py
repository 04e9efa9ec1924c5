"""Losing queue entries, or Redis altogether, loses no run: the database finds the work."""

from __future__ import annotations

import time

import pytest

from tests.chaos.cluster import (
    ClusterFactory,
    RunRef,
    submit,
    wait_terminal,
    wait_until,
)
from tests.support.throwaway import ThrowawayRedis


@pytest.mark.slow
@pytest.mark.timeout(120)
async def test_flushed_queue_runs_still_complete(cluster_factory: ClusterFactory) -> None:
    """DEL the queue key while runs wait in it: the reaper re-pushes the stranded runs."""
    # Two slots per instance, so most runs wait in the Redis list rather than executing.
    cluster = await cluster_factory(2, N_JOBS_PER_WORKER="2")
    a, b = cluster.instances
    refs: list[RunRef] = []
    for index in range(12):
        refs.append(await submit((a, b)[index % 2], "steps", cluster.steps_input(0.3)))
    with cluster.redis() as client:
        waiting = client.llen(cluster.queue_key)
        assert waiting >= 4, f"expected runs waiting in the queue, found {waiting}"
        assert client.delete(cluster.queue_key) == 1
    flushed_at = time.monotonic()

    final = await wait_terminal(cluster, refs, timeout=60)
    assert set(final.values()) == {"success"}, f"{final}\n{cluster.tails()}"
    print(f"flushed {waiting} queued runs; all done {time.monotonic() - flushed_at:.1f}s later")


@pytest.mark.slow
@pytest.mark.timeout(150)
async def test_runs_complete_while_redis_is_down(
    cluster_factory: ClusterFactory, throwaway_redis: ThrowawayRedis
) -> None:
    """Kill Redis with runs queued, submit more while it is down: the database poll runs them."""
    cluster = await cluster_factory(2, redis_url=throwaway_redis.url, N_JOBS_PER_WORKER="1")
    a, b = cluster.instances
    queued: list[RunRef] = []
    for index in range(8):
        queued.append(await submit((a, b)[index % 2], "steps", cluster.steps_input(0.3)))
    with cluster.redis() as client:
        waiting = client.llen(cluster.queue_key)
    assert waiting >= 2, f"expected runs waiting in the queue, found {waiting}"
    throwaway_redis.stop()
    killed_at = time.monotonic()

    during: list[RunRef] = []
    for index in range(4):
        during.append(await submit((a, b)[index % 2], "steps", cluster.steps_input(0.1)))

    final = await wait_terminal(cluster, queued + during, timeout=60)
    assert set(final.values()) == {"success"}, f"{final}\n{cluster.tails()}"
    down_for = time.monotonic() - killed_at
    assert a.alive() and b.alive()

    # Redis comes back (empty): the instances use it again.
    throwaway_redis.start()
    await wait_until(
        lambda: all("redis_reachable_again" in i.log_tail(500_000) for i in (a, b)),
        20,
        "both instances to use Redis again",
    )
    after = [await submit(a, "steps", cluster.steps_input(0.05))]
    final = await wait_terminal(cluster, after, timeout=30)
    assert set(final.values()) == {"success"}, f"{final}\n{cluster.tails()}"
    print(
        f"redis down: {waiting} queued + {len(during)} submitted while down, "
        f"all done in {down_for:.1f}s"
    )
