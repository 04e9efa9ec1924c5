"""The cron scheduler on a real runtime and database, with an injected clock."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from runyard.background.cron_scheduler import CronScheduler, occurrence_key
from runyard.db import crons as crons_db
from runyard.db import runs as runs_db
from runyard.domain.cron import CronRecord
from runyard.domain.run import RunRecord
from runyard.schemas.crons import ThreadCronCreate
from runyard.schemas.threads import ThreadCreate
from runyard.settings import Settings
from runyard.wiring.runtime import Runtime
from tests.support.databases import create_migrated_database, drop_database, postgres_available
from tests.support.server import TEST_CONFIG

YEARLY = "0 0 1 1 *"
# The injected clock runs years ahead, so the runtime's own scheduler (on the real clock)
# never finds these crons due and stays out of the way.
YEAR = datetime.now(UTC).year


def new_year(offset: int) -> datetime:
    """January 1st, `offset` years from now: an occurrence of YEARLY."""
    return datetime(YEAR + offset, 1, 1, tzinfo=UTC)


NOW = datetime(YEAR + 3, 6, 1, 12, 0, tzinfo=UTC)


@pytest.fixture(params=["sqlite", "postgres"])
async def runtime(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Runtime]:
    """A started runtime on a fresh database."""
    env: dict[str, Any] = {
        "RUNYARD_CONFIG": TEST_CONFIG,
        "RUNYARD_DATA_DIR": tmp_path / "data",
        "RUNYARD_CRON_INTERVAL_SECONDS": 60,
    }
    url = None
    if request.param == "postgres":
        if not postgres_available():
            pytest.fail("PostgreSQL is not reachable at 127.0.0.1:5432; start it (docs/testing.md)")
        url = create_migrated_database("runyard_cron")
        env["DATABASE_URL"] = url
    rt = Runtime(Settings(**env))
    try:
        await rt.start()
        yield rt
    finally:
        await rt.stop()
        if url is not None:
            drop_database(url)


def new_scheduler(rt: Runtime) -> CronScheduler:
    """A scheduler of this instance's, as the runtime builds one."""
    return CronScheduler(
        rt.sessions, rt.autocommit, rt.services.runs.create_run, rt.instance_id, 60
    )


async def overdue_cron(rt: Runtime, since: datetime) -> CronRecord:
    """A yearly cron on a new thread whose next run date is `since`, as a scheduler reads it."""
    thread = await rt.services.threads.create_thread(ThreadCreate())
    body = ThreadCronCreate(
        assistant_id="memory", schedule=YEARLY, input={"namespace": ["x"], "key": "k"}
    )
    cron = await rt.services.crons.create_cron(thread.thread_id, body)
    async with rt.sessions() as session, session.begin():
        row = await crons_db.update_cron(session, cron.cron_id, {"next_run_date": since})
    assert row is not None
    return row


async def runs_of(rt: Runtime, thread_id: str) -> list[RunRecord]:
    """Every run of a thread."""
    async with rt.sessions() as session:
        return await runs_db.list_runs(session, thread_id, 1000, 0, None)


async def test_overdue_cron_fires_once_for_the_latest_occurrence(runtime: Runtime) -> None:
    cron = await overdue_cron(runtime, new_year(2))  # two occurrences missed
    run_id = await new_scheduler(runtime).fire(cron, NOW)

    assert cron.thread_id is not None
    runs = await runs_of(runtime, cron.thread_id)
    assert [r.run_id for r in runs] == [run_id]
    assert runs[0].metadata["cron_scheduled_for"] == new_year(3).isoformat()
    async with runtime.sessions() as session:
        after = await crons_db.get_cron(session, cron.cron_id)
        firings = await crons_db.list_firings(session, cron.cron_id)
    assert after is not None and after.next_run_date == new_year(4)
    assert [(f.scheduled_for, f.run_id) for f in firings] == [(new_year(3), run_id)]


async def test_two_schedulers_firing_the_same_row_make_one_run(runtime: Runtime) -> None:
    cron = await overdue_cron(runtime, new_year(3))
    schedulers = [new_scheduler(runtime) for _ in range(4)]
    results = await asyncio.gather(*(s.fire(cron, NOW) for s in schedulers))
    assert len([r for r in results if r is not None]) == 1, results
    assert cron.thread_id is not None
    assert len(await runs_of(runtime, cron.thread_id)) == 1


async def test_a_claim_left_without_a_run_is_finished_once(runtime: Runtime) -> None:
    cron = await overdue_cron(runtime, new_year(5))
    assert cron.thread_id is not None
    scheduled_for = new_year(2)
    async with runtime.sessions() as session, session.begin():
        # An instance claimed the occurrence, then died before creating the run.
        assert await crons_db.claim_firing(session, cron.cron_id, scheduled_for, "dead")
        assert not await crons_db.claim_firing(session, cron.cron_id, scheduled_for, "me")
    scheduler = new_scheduler(runtime)

    await scheduler.housekeeping(datetime.now(UTC))  # too recent to be called stranded
    assert await runs_of(runtime, cron.thread_id) == []

    later = datetime.now(UTC) + timedelta(minutes=1)
    await scheduler.housekeeping(later)
    await scheduler.housekeeping(later)
    runs = await runs_of(runtime, cron.thread_id)
    assert len(runs) == 1
    assert runs[0].metadata["cron_scheduled_for"] == scheduled_for.isoformat()
    async with runtime.sessions() as session:
        firings = await crons_db.list_firings(session, cron.cron_id)
        by_key = await runs_db.get_run_by_idempotency_key(
            session, occurrence_key(cron.cron_id, scheduled_for)
        )
    assert [f.run_id for f in firings] == [runs[0].run_id]
    assert by_key is not None and by_key.run_id == runs[0].run_id

    # Creating the same occurrence's run again (a racing retry) answers with the same run.
    again = await scheduler.create_occurrence_run(cron, scheduled_for)
    assert again == runs[0].run_id
    assert len(await runs_of(runtime, cron.thread_id)) == 1


async def test_a_rejected_occurrence_records_why(runtime: Runtime) -> None:
    cron = await overdue_cron(runtime, new_year(3))
    async with runtime.sessions() as session, session.begin():
        await crons_db.update_cron(
            session,
            cron.cron_id,
            {"payload": {**cron.payload, "assistant_id": "not-an-assistant"}},
        )
        changed = await crons_db.get_cron(session, cron.cron_id)
    assert changed is not None
    assert await new_scheduler(runtime).fire(changed, NOW) is None
    async with runtime.sessions() as session:
        firings = await crons_db.list_firings(session, cron.cron_id)
    assert len(firings) == 1
    assert firings[0].run_id is None
    assert firings[0].error is not None and "not-an-assistant" in firings[0].error
