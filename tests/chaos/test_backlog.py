"""A large backlog drains completely without the sweeper multiplying the queue."""

from __future__ import annotations

import asyncio
import os
import time
import uuid

import httpx
import psycopg
import pytest
import redis.asyncio as aioredis

from tests.chaos.cluster import ClusterFactory, wait_until

# 2,000 queued runs, as the production-engine acceptance asks. On the 2-core box they took
# 58 s end to end at load ~2 and 75 s at load 4-5 (submitting and executing compete for the
# same two cores); RUNYARD_CHAOS_BACKLOG sets another size.
RUNS = int(os.environ.get("RUNYARD_CHAOS_BACKLOG", "2000"))
SUBMITTERS = 16
SLOTS = 10


@pytest.mark.slow
@pytest.mark.timeout(300)
async def test_backlog_drains_without_queue_amplification(cluster_factory: ClusterFactory) -> None:
    """LLEN of the queue never exceeds about twice the pending runs, and every run succeeds."""
    cluster = await cluster_factory(2, N_JOBS_PER_WORKER=str(SLOTS))
    urls = [instance.url for instance in cluster.instances]
    pg_url = cluster.database_url.replace("postgresql+asyncpg://", "postgresql://")
    samples: list[tuple[float, int, int]] = []
    done = asyncio.Event()

    async def submit_all(worker: int, http: httpx.AsyncClient) -> None:
        for index in range(worker, RUNS, SUBMITTERS):
            body = {
                "assistant_id": "short",
                "input": {"delay": 0.05},
                "if_not_exists": "create",
            }
            url = f"{urls[index % len(urls)]}/threads/{uuid.uuid4()}/runs"
            response = await http.post(url, json=body)
            assert response.status_code == 200, response.text

    async def sample(queue: aioredis.Redis, db: psycopg.AsyncConnection) -> None:
        while not done.is_set():
            before = await pending(db)
            length = int(await queue.hlen(cluster.queue_key))
            after = await pending(db)
            samples.append((time.monotonic(), length, max(before, after)))
            await asyncio.sleep(0.2)

    started = time.monotonic()
    async with (
        httpx.AsyncClient(timeout=60) as http,
        aioredis.from_url(cluster.redis_url) as queue,
        await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as db,
    ):
        sampler = asyncio.create_task(sample(queue, db))
        await asyncio.gather(*(submit_all(w, http) for w in range(SUBMITTERS)))
        submit_seconds = time.monotonic() - started

        async def drained() -> bool:
            return await finished(db) >= RUNS

        await wait_until(drained, 240, f"{RUNS} runs to finish", interval=0.5)
        total_seconds = time.monotonic() - started
        done.set()
        await sampler
        sql = "SELECT status, count(*) FROM runs GROUP BY status"
        rows = await (await db.execute(sql)).fetchall()
        counts = {str(status): int(count) for status, count in rows}

    assert counts == {"success": RUNS}, f"{counts}\n{cluster.tails()}"
    worst = max(samples, key=lambda s: s[1] - 2 * s[2])
    peak_length = max(s[1] for s in samples)
    print(
        f"backlog: {RUNS} runs, submitted in {submit_seconds:.1f}s, all done in "
        f"{total_seconds:.1f}s ({RUNS / total_seconds:.0f} runs/s); peak LLEN {peak_length}; "
        f"worst sample LLEN={worst[1]} pending={worst[2]}; {len(samples)} samples"
    )
    # Reads are not atomic with each other: a little slack over 2x for runs claimed between.
    amplified = [s for s in samples if s[1] > 2 * s[2] + 2 * SLOTS]
    assert not amplified, f"queue longer than twice the pending runs: {amplified[:10]}"


async def pending(db: psycopg.AsyncConnection) -> int:
    """Runs waiting for a worker."""
    row = await (await db.execute("SELECT count(*) FROM runs WHERE status = 'pending'")).fetchone()
    return int(row[0]) if row else 0


async def finished(db: psycopg.AsyncConnection) -> int:
    """Runs in a terminal status."""
    sql = "SELECT count(*) FROM runs WHERE status IN ('success', 'error', 'interrupted', 'timeout')"
    row = await (await db.execute(sql)).fetchone()
    return int(row[0]) if row else 0
