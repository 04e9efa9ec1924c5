"""What the database fallback promises while Redis is unreachable, on SQLite and PostgreSQL.

With Redis reachable it keeps the run queue contract (test_queue_contract.py runs it there).
Unreachable, it differs from a queue in a documented way: `pop` polls the database for the
oldest claimable run and does not remove it, so the same id comes again until a worker
claims it; the claim, not the queue, makes delivery exclusive. Once Redis answers again,
and nothing in the database is claimable, it is a Redis queue again.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import timedelta

import pytest
from redis.asyncio import Redis
from redis.exceptions import RedisError
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from runyard.db import run_claims as claims_db
from runyard.db import runs as runs_db
from runyard.db import threads as threads_db
from runyard.db.dialect import database_now
from runyard.queue.redis_queue import DatabaseFallbackQueue, RedisRunQueue
from tests.support.databases import migrated_engine
from tests.support.rows import run_row, thread_row
from tests.support.throwaway import ThrowawayRedis

pytestmark = pytest.mark.timeout(60)

# Nothing listens on port 1: every command fails at once with a refused connection.
UNREACHABLE_REDIS = "redis://127.0.0.1:1/0"


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
async def database(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[AsyncEngine]:
    """A migrated database of each kind, one for the module (made in about a second)."""
    async with migrated_engine(request.param, tmp_path_factory.mktemp("fallback")) as made:
        yield made


@pytest.fixture
async def engine(database: AsyncEngine) -> AsyncEngine:
    """The module's database, with no run or thread left by an earlier test."""
    async with database.begin() as session:
        await session.execute(text("DELETE FROM runs"))
        await session.execute(text("DELETE FROM threads"))
    return database


@pytest.fixture
async def queue(engine: AsyncEngine) -> AsyncIterator[DatabaseFallbackQueue]:
    """The fallback queue over a Redis that refuses connections and a real database."""
    redis = Redis.from_url(UNREACHABLE_REDIS, socket_connect_timeout=1)
    try:
        yield _fallback(redis, engine)
    finally:
        await redis.aclose()


def _fallback(redis: Redis, engine: AsyncEngine) -> DatabaseFallbackQueue:
    """The fallback queue as the transport builds it, polling the database every 50 ms."""

    async def claimable(skipped_groups: list[str]) -> str | None:
        async with engine.begin() as session:
            return await claims_db.find_claimable_run(session, skipped_groups)

    return DatabaseFallbackQueue(RedisRunQueue(redis, "fallback:"), claimable, 0.05)


async def _pending_run(
    engine: AsyncEngine, after_seconds: float = 0.0, group: str = "default"
) -> str:
    thread_id, run_id = str(uuid.uuid4()), str(uuid.uuid4())
    async with engine.begin() as session:
        row = {**run_row(run_id, thread_id), "fairness_group": group}
        if after_seconds:
            row["scheduled_at"] = await database_now(session) + timedelta(seconds=after_seconds)
        await threads_db.insert_thread(session, thread_row(thread_id))
        await runs_db.insert_run(session, row)
    return run_id


async def test_a_push_redis_refuses_is_not_an_error(queue: DatabaseFallbackQueue) -> None:
    await queue.push("run-1")
    await queue.push("run-2", delay=5)
    assert queue.redis_down_since is not None


async def test_pop_finds_pending_runs_in_the_database_oldest_first_until_claimed(
    queue: DatabaseFallbackQueue, engine: AsyncEngine
) -> None:
    older = await _pending_run(engine)
    newer = await _pending_run(engine)
    await queue.push(older)  # lost: Redis refuses it
    assert await queue.pop(timeout=0.1) == older
    assert await queue.pop(timeout=0.1) == older  # not removed: only a claim takes it
    async with engine.begin() as session:
        assert await claims_db.claim_run(session, older, "instance-a", 30) is not None
    assert await queue.pop(timeout=0.1) == newer


async def test_the_poll_skips_a_group_held_by_a_cap_until_the_hold_ends(
    queue: DatabaseFallbackQueue, engine: AsyncEngine
) -> None:
    capped = await _pending_run(engine, group="capped")
    other = await _pending_run(engine, group="other")
    assert await queue.pop(timeout=0.1) == capped
    # Its claim was refused by a cap: the poll finds the other group's run instead of
    # bouncing the capped one at every tick.
    await queue.hold(capped, "capped", 0, 2.0)
    assert await queue.pop(timeout=0.1) == other
    async with engine.begin() as session:
        assert await claims_db.claim_run(session, other, "instance-a", 30) is not None
    assert await queue.pop(timeout=0.1) is None
    found = None
    for _ in range(200):
        found = await queue.pop(timeout=0.1)
        if found is not None:
            break
    assert found == capped


async def test_a_delayed_run_is_not_found_before_its_time(
    queue: DatabaseFallbackQueue, engine: AsyncEngine
) -> None:
    later = await _pending_run(engine, after_seconds=60)
    await queue.push(later, delay=60)  # lost: Redis refuses it; the database keeps the time
    assert await queue.pop(timeout=0.1) is None


async def test_pop_with_nothing_claimable_returns_none(queue: DatabaseFallbackQueue) -> None:
    assert await queue.pop(timeout=0.1) is None
    assert queue.redis_down_since is not None


async def test_nothing_counts_as_queued_and_depth_is_unknown(
    queue: DatabaseFallbackQueue, engine: AsyncEngine
) -> None:
    run_id = await _pending_run(engine)
    await queue.push(run_id)
    # The sweeper re-pushes what is not queued: with Redis away that is every pending run.
    assert await queue.queued([run_id]) == set()
    with pytest.raises(RedisError):
        await queue.depth()


async def test_once_redis_answers_again_the_queue_is_redis_again(engine: AsyncEngine) -> None:
    """A private Redis is killed and restarted: meanwhile the database is polled, then pushes
    and pops go through Redis again (what the kill lost, the database still holds)."""
    server = ThrowawayRedis().start()
    redis = Redis.from_url(server.url, socket_connect_timeout=1)
    queue = _fallback(redis, engine)
    try:
        await queue.push("before")
        assert await queue.pop(timeout=0.1) == "before"
        server.stop()
        pending = await _pending_run(engine)
        await queue.push(pending)
        assert queue.redis_down_since is not None
        assert await queue.pop(timeout=0.1) == pending
        async with engine.begin() as session:
            assert await claims_db.claim_run(session, pending, "instance-a", 30) is not None
        server.start()
        assert await queue.pop(timeout=0.1) is None  # nothing claimable: Redis is asked again
        assert queue.redis_down_since is None
        await queue.push("after")
        assert await queue.pop(timeout=1) == "after"
    finally:
        await redis.aclose()
        server.stop()
