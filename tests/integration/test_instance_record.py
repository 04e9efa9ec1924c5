"""An instance's own row for the console, on each backend: written at every beat with what it
reads of itself, carrying out once a drain an operator asked of it, and removed at stop."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from runyard.background.instance_record import InstanceRecord
from runyard.db import instances as instances_db
from runyard.db.engine import session_factory
from tests.support.databases import migrated_engine

pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_the_row_follows_the_instance_and_carries_a_drain(
    backend: str, tmp_path: Path
) -> None:
    async with migrated_engine(backend, tmp_path) as engine:
        sessions = session_factory(engine, autocommit=True)
        state = {"used": 3, "draining": False, "drains": 0}

        def drain() -> None:
            state["drains"] += 1
            state["draining"] = True

        record = InstanceRecord(
            sessions, "host:1:abc", 0.05, lambda: 10, lambda: state["used"],
            lambda: state["draining"], drain,
        )  # fmt: skip
        await record.write()
        async with sessions() as session:
            [row] = await instances_db.list_instances(session)
        assert (row["instance_id"], row["slots"], row["slots_used"]) == ("host:1:abc", 10, 3)
        assert row["draining"] is False and row["drain_requested_by"] is None
        first_beat = row["heartbeat_at"]

        async with sessions() as session:
            assert await instances_db.request_drain(session, "host:1:abc", "console-token")
            assert not await instances_db.request_drain(session, "someone:else", "x")
        state["used"] = 1
        await record.write()
        await record.write()
        assert state["drains"] == 1
        async with sessions() as session:
            [row] = await instances_db.list_instances(session)
        assert row["drain_requested_by"] == "console-token" and row["draining"] is True
        assert row["slots_used"] == 1 and row["heartbeat_at"] > first_beat

        stop = asyncio.Event()
        loop = asyncio.create_task(record.run_forever(stop))
        await asyncio.sleep(0.2)
        stop.set()
        await loop
        async with sessions() as session:
            assert await instances_db.list_instances(session) == []
