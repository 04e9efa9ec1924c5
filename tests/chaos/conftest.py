"""Chaos fixtures: clusters of real `runyard serve` processes on PostgreSQL and Redis."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from tests.chaos.cluster import CHAOS_CONFIG, CHAOS_ENV, SHARED_REDIS, Cluster, ClusterFactory
from tests.support.databases import create_migrated_database, drop_database, postgres_available
from tests.support.redis_keys import delete_keys
from tests.support.server import free_port
from tests.support.throwaway import ThrowawayPostgres, ThrowawayRedis, postgres_tools


@pytest.fixture
async def cluster_factory(tmp_path: Path) -> AsyncIterator[ClusterFactory]:
    """Builds clusters (`await make(n, redis_url=..., **env)`), torn down after the test."""
    if not postgres_available():
        pytest.fail("PostgreSQL is not reachable at 127.0.0.1:5432; start it (docs/testing.md)")
    made: list[Cluster] = []
    private: set[str] = set()  # databases of a throwaway server: it goes with them

    async def make(
        count: int = 2,
        redis_url: str = SHARED_REDIS,
        config: Path = CHAOS_CONFIG,
        postgres: ThrowawayPostgres | None = None,
        **overrides: str,
    ) -> Cluster:
        """`postgres`: a private server to use instead of a database on the shared one."""
        prefix = f"chaos-{uuid.uuid4().hex[:12]}:"
        url = postgres.url if postgres is not None else create_migrated_database("runyard_chaos")
        env = {
            **CHAOS_ENV,
            **overrides,
            "DATABASE_URL": url,
            "REDIS_URL": redis_url,
            "RUNYARD_REDIS_PREFIX": prefix,
        }
        workdir = tmp_path / f"cluster-{len(made)}"
        cluster = Cluster(workdir, url, redis_url, prefix, env, config, migrated=postgres is None)
        made.append(cluster)
        if postgres is not None:
            private.add(url)
        await asyncio.to_thread(cluster.start, count)
        return cluster

    try:
        yield make
    finally:
        for cluster in made:
            try:
                await cluster.close()
            finally:
                if cluster.database_url not in private:
                    drop_database(cluster.database_url)
                delete_keys(cluster.redis_url, cluster.prefix)


@pytest.fixture
async def cluster(cluster_factory: ClusterFactory) -> Cluster:
    """Two instances on the shared Redis with the chaos timings."""
    return await cluster_factory(2)


@pytest.fixture
def throwaway_redis() -> Iterator[ThrowawayRedis]:
    """A redis-server only this test uses (never the shared one)."""
    server = ThrowawayRedis(free_port()).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def throwaway_postgres() -> Iterator[ThrowawayPostgres]:
    """A PostgreSQL server only this test uses, so it may stop it (never the shared one)."""
    tools = postgres_tools()
    if tools is None:
        pytest.fail("initdb and pg_ctl were not found; install PostgreSQL's server package")
    server = ThrowawayPostgres(tools).init()
    try:
        yield server
    finally:
        server.destroy()
