"""Instances starting together on a fresh PostgreSQL database all start (no setup race)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from runyard.checkpoints.checkpointer import open_checkpointer
from runyard.db.engine import create_engine
from runyard.longterm_store.store import StoreOptions, open_store
from tests.support.databases import (
    create_database,
    drop_database,
    open_statement_pool,
    postgres_available,
)

INSTANCES = 4


@pytest.mark.postgres
async def test_savers_of_instances_starting_together_set_up_their_tables_in_turn(
    tmp_path: Path,
) -> None:
    if not postgres_available():
        pytest.fail("PostgreSQL is not reachable at 127.0.0.1:5432; start it (docs/testing.md)")
    url = create_database("runyard_setup")
    options = StoreOptions(index=None, ttl={}, sweep_interval_seconds=300.0)
    # Pools of a single connection: setup() must not wait for the one its lock holds.
    database_url = "postgresql+asyncpg://" + url.split("://", 1)[1]

    async def start() -> bool:
        engine = create_engine(database_url, pool_size=1)
        try:
            async with (
                open_statement_pool(engine, 1) as statements,
                open_checkpointer(database_url, tmp_path, None, 1, statements) as saver,
                open_store(database_url, tmp_path, options, 1) as store,
            ):
                config = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
                await saver.aget_tuple(config)  # type: ignore[arg-type]
                await store.aget(("ns",), "key")
                return True
        finally:
            await engine.dispose()

    try:
        results = await asyncio.wait_for(
            asyncio.gather(*(start() for _ in range(INSTANCES))), timeout=60
        )
        assert results == [True] * INSTANCES
    finally:
        drop_database(url)
