"""Losing queue entries, or Redis altogether, loses no run: the database finds the work."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path

import pytest

from tests.chaos.cluster import (
    DEFAULT_ENV,
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
    """DEL the queue keys while runs wait in them: the reaper re-pushes the stranded runs."""
    # Two slots per instance, so most runs wait in the Redis list rather than executing.
    cluster = await cluster_factory(2, N_JOBS_PER_WORKER="2")
    a, b = cluster.instances
    refs: list[RunRef] = []
    for index in range(12):
        refs.append(await submit((a, b)[index % 2], "steps", cluster.steps_input(0.3)))
    with cluster.redis() as client:
        waiting = client.hlen(cluster.queue_key)
        assert waiting >= 4, f"expected runs waiting in the queue, found {waiting}"
        assert client.delete(*cluster.queue_keys) == len(cluster.queue_keys)
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
        waiting = client.hlen(cluster.queue_key)
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


BENCH_CONFIG = Path(__file__).resolve().parents[2] / "bench" / "graphs" / "langgraph.json"
RELAY = {"assistant_id": "relay", "input": {"seen": []}, "if_not_exists": "create"}


def _sse(body: str) -> list[tuple[str, str]]:
    """(event, data) of every SSE frame of a body (comments skipped)."""
    frames = []
    for block in body.replace("\r\n", "\n").split("\n\n"):
        fields = dict(
            line.split(": ", 1) for line in block.split("\n") if ": " in line and line[0] != ":"
        )
        if "event" in fields:
            frames.append((fields["event"], fields.get("data", "")))
    return frames


@pytest.mark.slow
@pytest.mark.timeout(150)
async def test_wait_and_stream_answer_whole_while_redis_is_down(
    cluster_factory: ClusterFactory, throwaway_redis: ThrowawayRedis
) -> None:
    """With Redis gone, /runs/wait and /runs/stream answer the run's final state in full
    (from the database), never a body cut short, at the default settings."""
    cluster = await cluster_factory(
        1, redis_url=throwaway_redis.url, config=BENCH_CONFIG, **DEFAULT_ENV
    )
    (instance,) = cluster.instances
    throwaway_redis.stop()

    waited = await instance.http.post(f"/threads/{uuid.uuid4()}/runs/wait", json=RELAY, timeout=90)
    assert waited.status_code == 200, waited.text
    assert waited.json()["seen"] == ["n1", "n2", "n3"], f"{waited.text}\n{cluster.tails()}"

    body = {**RELAY, "stream_mode": ["values"]}
    path = f"/threads/{uuid.uuid4()}/runs/stream"
    async with instance.http.stream("POST", path, json=body, timeout=90) as response:
        assert response.status_code == 200
        text = (await response.aread()).decode()
    frames = _sse(text)
    assert frames and frames[-1][0] == "end", f"{text}\n{cluster.tails()}"
    values = [json.loads(data) for event, data in frames if event == "values"]
    assert values and values[-1]["seen"] == ["n1", "n2", "n3"], text

    statuses = dict(cluster.sql("SELECT status, count(*) FROM runs GROUP BY status"))
    assert statuses == {"success": 2}, statuses
    assert "Exception in ASGI application" not in instance.log_tail(1_000_000)
