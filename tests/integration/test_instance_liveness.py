"""A fleet instance's liveness is a PostgreSQL session. When the connection holding an
instance's lock is lost, the others take its run over before the run's lease expires, and
the instance stops claiming until it has taken its lock back; an owner never seen holding a
lock (an instance of an earlier version) is left to its leases. In-process, at default
settings: two runtimes on one PostgreSQL database and Redis, one executing runs."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from runyard.background.liveness import Liveness
from runyard.db import liveness as liveness_db
from runyard.db import run_claims as claims_db
from runyard.db import runs as runs_db
from runyard.db import threads as threads_db
from runyard.domain.run import RunRecord
from runyard.domain.status import RunStatus
from runyard.schemas.runs import RunCreate
from runyard.wiring.runtime import Runtime
from tests.support.instances import Instances, deployment, stored_run
from tests.support.rows import run_row, thread_row

pytestmark = pytest.mark.timeout(120)

# An owner that never held a liveness lock: an instance of an earlier version.
UNSEEN = "old-version-host:4242:deadbeef"


@pytest.fixture
async def fleet(tmp_path: Path) -> AsyncIterator[Instances]:
    async with deployment("postgres", tmp_path, "runyard_liveness") as rt:
        yield rt


async def _run_of_an_unseen_owner(rt: Runtime) -> str:
    """A run claimed by UNSEEN under a lease that would hold it for an hour."""
    thread_id, run_id = str(uuid.uuid4()), str(uuid.uuid4())
    row = {**run_row(run_id, thread_id, "enqueue"), "kwargs": {"graph_id": "slow", "input": {}}}
    async with rt.sessions() as session, session.begin():
        await threads_db.insert_thread(session, thread_row(thread_id))
        await runs_db.insert_run(session, row)
        assert await claims_db.claim_run(session, run_id, UNSEEN, 3600.0)
    return run_id


async def _scalar(rt: Runtime, sql: str, **params: Any) -> Any:
    async with rt.autocommit() as session:
        return (await session.execute(text(sql), params)).scalar_one()


async def _polled(rt: Runtime, run_id: str, done: Any, what: str) -> RunRecord:
    """The run once `done(run)` holds (polled for 60 s)."""
    for _ in range(1200):
        run = await stored_run(rt, run_id)
        if run is not None and done(run):
            return run
        await asyncio.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


async def test_an_instance_that_lost_its_lock_loses_its_run_and_stops_claiming(
    fleet: Instances, monkeypatch: pytest.MonkeyPatch
) -> None:
    rt = fleet
    liveness = rt.worker.liveness
    assert liveness is not None and rt.api.liveness is not None
    assert liveness.state is Liveness.HELD
    unseen = await _run_of_an_unseen_owner(rt.api)
    thread_id = str(uuid.uuid4())
    # Its first step sleeps past the moment the reapers may judge others (their own
    # liveness sessions a lease old).
    created = await rt.api.services.runs.create_run(
        thread_id, RunCreate(assistant_id="slow", input={"seconds": 12}, if_not_exists="create")
    )
    run = await _polled(rt.api, created.run_id, lambda r: r.status == RunStatus.RUNNING, "start")
    async with rt.api.autocommit() as session:
        alive = await liveness_db.instances_alive(session, [rt.worker.instance_id, UNSEEN])
    assert alive == {rt.worker.instance_id: True, UNSEEN: False}
    lease = rt.api.settings.lease_duration_seconds
    for _ in range(400):
        async with rt.api.autocommit() as session:
            if (await liveness_db.owners(session, rt.api.instance_id, lease)).trusted:
                break
        await asyncio.sleep(0.05)

    refused = asyncio.Event()

    async def unreachable(*_args: Any, **_kwargs: Any) -> Any:
        refused.set()
        raise OSError("the database cannot be reached")

    monkeypatch.setattr(liveness_db, "connect", unreachable)
    expiry = await _scalar(
        rt.api,
        "SELECT extract(epoch FROM lease_expires_at) FROM runs WHERE run_id = :run_id",
        run_id=run.run_id,
    )
    backend = await _scalar(
        rt.api,
        "SELECT pid FROM pg_stat_activity WHERE application_name = :name",
        name=f"runyard liveness {rt.worker.instance_id}"[:63],
    )
    await _scalar(rt.api, "SELECT pg_terminate_backend(:pid)", pid=backend)

    # Taken over (back to pending) before its lease could have expired.
    await _polled(rt.api, run.run_id, lambda r: r.status == RunStatus.PENDING, "the takeover")
    now = await _scalar(rt.api, "SELECT extract(epoch FROM clock_timestamp())")
    assert now < expiry, f"taken over {now - expiry:.2f} s after the lease expired"
    await asyncio.wait_for(refused.wait(), 20)
    assert liveness.state is Liveness.LOST
    # Lost, the instance claims nothing: the run stays pending for three checks.
    await asyncio.sleep(3 * rt.worker.settings.heartbeat_interval_seconds / 2)
    pending = await stored_run(rt.api, run.run_id)
    assert pending is not None and (pending.status, pending.attempt) == (RunStatus.PENDING, 1)
    # An owner never seen holding a lock waits for its lease (an hour).
    kept = await stored_run(rt.api, unseen)
    assert kept is not None and (kept.status, kept.owner) == (RunStatus.RUNNING, UNSEEN)

    # Its lock back, it claims again: the run's next attempt is its own.
    monkeypatch.undo()
    again = await _polled(rt.api, run.run_id, lambda r: r.attempt == 2, "the next attempt")
    assert again.owner == rt.worker.instance_id and liveness.state is Liveness.HELD
