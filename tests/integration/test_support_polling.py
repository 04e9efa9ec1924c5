"""The test helper that waits on pg_stat_activity sees backends end while it waits."""

from __future__ import annotations

import asyncio
import uuid

import asyncpg
import pytest

from runyard.db.engine import create_engine
from tests.support.databases import postgres_available, until_true

pytestmark = pytest.mark.postgres

ADMIN = "postgresql://postgres@127.0.0.1:5432/postgres"


async def test_until_true_sees_a_backend_that_ends_after_its_first_look() -> None:
    if not postgres_available():
        pytest.fail("PostgreSQL is not reachable at 127.0.0.1:5432; start it (docs/testing.md)")
    name = f"poll_{uuid.uuid4().hex[:12]}"
    other = await asyncpg.connect(ADMIN, server_settings={"application_name": name})
    engine = create_engine("postgresql+asyncpg://" + ADMIN.split("://", 1)[1], pool_size=1)
    try:
        gone = asyncio.create_task(
            until_true(
                engine,
                f"SELECT count(*) = 0 FROM pg_stat_activity WHERE application_name = '{name}'",
                f"{name} gone",
            )
        )
        await asyncio.sleep(0.2)  # several looks while the backend is still there
        assert not gone.done()
        await other.close()
        await asyncio.wait_for(gone, timeout=10)
    finally:
        if not other.is_closed():
            await other.close()
        await engine.dispose()
