"""Costs that must stay flat (DESIGN): counted in statements against a real database."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from sqlalchemy import select, text

from runyard.db import run_attempts as attempts_db
from runyard.db import run_claims as claims_db
from runyard.db import runs as runs_db
from runyard.db import threads as threads_db
from runyard.db.engine import session_factory
from runyard.db.tables import runs
from runyard.domain.run import ClaimedRun
from runyard.domain.status import RunStatus, ThreadStatus
from runyard.observability.metrics import Metrics
from runyard.settings import Settings
from runyard.worker.lease import LeaseKeeper
from runyard.worker.registry import RunningRuns
from tests.support.databases import Counted
from tests.support.metrics import scrape, value
from tests.support.redis_keys import postgres_and_redis
from tests.support.rows import run_row, thread_row
from tests.support.server import ROOT, ServerProcess


@pytest.fixture
def database(counted_database: Counted) -> Counted:
    """A fresh, migrated database of each backend, its statements counted."""
    return counted_database


async def _claimed_runs(db: Counted, owner: str, count: int) -> list[ClaimedRun]:
    """`count` runs, each on its own thread, claimed by `owner`."""
    sessions = session_factory(db.engine)
    claimed = []
    for _ in range(count):
        thread_id, run_id = str(uuid.uuid4()), str(uuid.uuid4())
        async with sessions() as session, session.begin():
            await threads_db.insert_thread(session, thread_row(thread_id))
            await runs_db.insert_run(session, run_row(run_id, thread_id))
            claim = await claims_db.claim_run(session, run_id, owner, 30.0)
        assert claim is not None
        claimed.append(claim)
    return claimed


async def test_a_run_on_a_new_thread_is_one_statement_and_never_joins_an_existing_one(
    database: Counted,
) -> None:
    sessions = session_factory(database.engine)
    thread_id, first, second = str(uuid.uuid4()), str(uuid.uuid4()), str(uuid.uuid4())
    counted = database.statements
    async with sessions() as session, session.begin():
        row = await runs_db.insert_run_on_new_thread(
            session, thread_row(thread_id), run_row(first, thread_id)
        )
    assert row is not None and row.run_id == first and row.thread_id == thread_id
    dialect = database.engine.dialect.name
    assert database.statements - counted == (1 if dialect == "postgresql" else 2)
    # The thread exists now: nothing is written, and the caller takes the general path.
    async with sessions() as session, session.begin():
        again = await runs_db.insert_run_on_new_thread(
            session, thread_row(thread_id), run_row(second, thread_id)
        )
        assert again is None
        assert await runs_db.get_run(session, second) is None
        thread = await threads_db.get_thread(session, thread_id)
    assert thread is not None and thread.status == ThreadStatus.BUSY


async def _leases(db: Counted, run_ids: list[str]) -> dict[str, Any]:
    async with db.engine.connect() as conn:
        rows = await conn.execute(
            select(runs.c.run_id, runs.c.lease_expires_at).where(runs.c.run_id.in_(run_ids))
        )
        return {row.run_id: row.lease_expires_at for row in rows}


@pytest.mark.parametrize("held", [1, 25])
async def test_one_lease_renewal_is_one_statement_however_many_runs_are_held(
    database: Counted, held: int
) -> None:
    owner = f"instance-{uuid.uuid4().hex[:8]}"
    claimed = await _claimed_runs(database, owner, held)
    running = RunningRuns()
    sleeper = asyncio.create_task(asyncio.sleep(3600))
    for row in claimed:
        running.add(row.run.run_id, row.run.attempt, sleeper)
    keeper = LeaseKeeper(
        running,
        session_factory(database.engine),
        owner,
        Settings(LEASE_DURATION_SECONDS=60),
        Metrics(in_flight=lambda: held),
    )
    ids = [row.run.run_id for row in claimed]
    before = await _leases(database, ids)
    try:
        counted = database.statements
        await keeper.renew_once()
        assert database.statements - counted == 1
    finally:
        sleeper.cancel()
    after = await _leases(database, ids)
    assert all(after[run_id] > before[run_id] for run_id in ids)
    assert all(entry.stop_reason is None for entry in running.all())


# DESIGN: per-run overhead in the database is a handful of small statements. About 5 for a
# stateless run (8 on SQLite, where the run's insert with its new thread, the claim and the
# final write are two statements each);
# the bound leaves room for the background loops (reaper, crons) during the measurement.
STATEMENTS_PER_RUN = 12
RUNS = 20


async def _runyard_statements(http: httpx.AsyncClient) -> float:
    return value(await scrape(http), "runyard_db_statements_total", database="runs")


async def test_a_run_costs_a_handful_of_runyard_statements(base_url: str) -> None:
    async with httpx.AsyncClient(base_url=base_url, timeout=60) as http:
        body = {"assistant_id": "pipeline", "input": {"text": "a b"}}
        assert (await http.post("/runs/wait", json=body)).status_code == 200
        before = await _runyard_statements(http)
        for _ in range(RUNS):
            response = await http.post("/runs/wait", json=body)
            assert response.status_code == 200, response.text
        after = await _runyard_statements(http)
    per_run = (after - before) / RUNS
    print(f"Runyard statements per stateless run: {per_run:.1f}")
    assert 0 < per_run <= STATEMENTS_PER_RUN


async def test_a_background_run_and_its_join_cost_a_handful_of_statements(base_url: str) -> None:
    """About 7 on PostgreSQL: the run with its thread, the claim, the final write, the
    next-run lookup, and the join's two reads (before waiting and once woken)."""
    async with httpx.AsyncClient(base_url=base_url, timeout=60) as http:
        body = {"assistant_id": "pipeline", "input": {"text": "a b"}, "if_not_exists": "create"}
        before = await _runyard_statements(http)
        for _ in range(RUNS):
            thread_id = str(uuid.uuid4())
            created = await http.post(f"/threads/{thread_id}/runs", json=body)
            assert created.status_code == 200, created.text
            run_id = created.json()["run_id"]
            joined = await http.get(f"/threads/{thread_id}/runs/{run_id}/join")
            assert joined.status_code == 200, joined.text
        after = await _runyard_statements(http)
    per_run = (after - before) / RUNS
    print(f"Runyard statements per background run and join: {per_run:.1f}")
    assert 0 < per_run <= STATEMENTS_PER_RUN


async def test_a_claim_also_says_whether_the_thread_has_a_checkpoint(database: Counted) -> None:
    sessions = session_factory(database.engine)
    owner = f"instance-{uuid.uuid4().hex[:8]}"
    empty, written_claim = await _claimed_runs(database, owner, 2)
    written = written_claim.run
    postgres = database.engine.dialect.name == "postgresql"
    # SQLite keeps its checkpoints elsewhere (their own file): its claim cannot tell.
    assert empty.thread_has_checkpoint is (False if postgres else None)
    if not postgres:
        return
    # A thread with a checkpoint, and a new run on it: the claim sees the checkpoint.
    async with database.engine.begin() as conn:
        await conn.execute(
            text(
                "INSERT INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, checkpoint, "
                "metadata) VALUES (:thread_id, '', 'c1', '{}', '{}')"
            ),
            {"thread_id": written.thread_id},
        )
    async with sessions() as session, session.begin():
        await attempts_db.finish_run(session, written.run_id, 1, RunStatus.SUCCESS, None, None)
        again = run_row(str(uuid.uuid4()), written.thread_id)
        await runs_db.insert_run(session, again)
    async with sessions() as session, session.begin():
        claimed = await claims_db.claim_run(session, again["run_id"], owner, 30.0)
    assert claimed is not None and claimed.thread_has_checkpoint is True


async def test_renewal_keeps_only_the_attempts_this_instance_executes(database: Counted) -> None:
    """A run claimed by this instance whose task is gone (it ended without finishing or
    releasing the run) is not renewed: its lease runs out and the reaper recovers it."""
    owner = f"instance-{uuid.uuid4().hex[:8]}"
    executing, abandoned = (claim.run for claim in await _claimed_runs(database, owner, 2))
    running = RunningRuns()
    sleeper = asyncio.create_task(asyncio.sleep(3600))
    running.add(executing.run_id, executing.attempt, sleeper)
    keeper = LeaseKeeper(
        running,
        session_factory(database.engine),
        owner,
        Settings(LEASE_DURATION_SECONDS=60),
        Metrics(in_flight=lambda: 1),
    )
    ids = [executing.run_id, abandoned.run_id]
    before = await _leases(database, ids)
    try:
        await keeper.renew_once()
    finally:
        sleeper.cancel()
    after = await _leases(database, ids)
    assert after[executing.run_id] > before[executing.run_id]
    assert after[abandoned.run_id] == before[abandoned.run_id]


ORDERING_CONFIG = ROOT / "tests" / "graphs" / "langgraph_ordering.json"
QUEUED = 100  # runs queued behind the gate per measurement


@pytest.fixture(scope="module")
def grouped_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """`runyard serve` on PostgreSQL and Redis, one worker slot, runs grouped by
    `metadata.tenant`: (base URL, database URL)."""
    workdir = tmp_path_factory.mktemp("grouped")
    env = {
        "WORKER_COUNT": "1",
        "N_JOBS_PER_WORKER": "1",
        "RUNYARD_FAIRNESS_KEY": "tenant",
        "ORDER_FILE": str(workdir / "order.txt"),
    }
    with postgres_and_redis("runyard_grouped") as deployment:
        proc = ServerProcess("serve", workdir, config=ORDERING_CONFIG, env={**deployment, **env})
        try:
            yield proc.start().url, deployment["DATABASE_URL"]
        finally:
            proc.stop()


async def _until_count(db: psycopg.AsyncConnection, sql: str, params: Any, wanted: int) -> None:
    """Poll a count until it is `wanted` (at most 60 s)."""
    counted = -1
    for _ in range(600):
        row = await (await db.execute(sql, params)).fetchone()
        counted = int(row[0]) if row else 0
        if counted == wanted:
            return
        await asyncio.sleep(0.1)
    pytest.fail(f"{sql} {params!r}: {counted}, not {wanted}")


async def _dispatch_statements(
    http: httpx.AsyncClient, database_url: str, groups: int, gate: Path
) -> float:
    """Runyard's statements per run while QUEUED runs in `groups` fairness groups, queued
    behind a run that holds the one slot, are claimed, executed and finished."""
    thread = str(uuid.uuid4())
    held = {"assistant_id": "gate", "input": {"gate": str(gate)}, "if_not_exists": "create"}
    created = await http.post(f"/threads/{thread}/runs", json=held)
    assert created.status_code == 200, created.text
    tenant = uuid.uuid4().hex[:6]
    bodies = [
        {
            "assistant_id": "stamp",
            "input": {"tag": f"{tenant}-{n}"},
            "metadata": {"tenant": f"{tenant}-{n % groups}"},
            "on_completion": "keep",
        }
        for n in range(QUEUED)
    ]
    batch = await http.post("/runs/batch", json=bodies)
    assert batch.status_code == 200, batch.text
    run_ids = [run["run_id"] for run in batch.json()]
    in_status = "SELECT count(*) FROM runs WHERE run_id = ANY(%s) AND status = %s"
    url = database_url.replace("postgresql+asyncpg://", "postgresql://")
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as db:
        await _until_count(db, in_status, ([created.json()["run_id"]], "running"), 1)
        await _until_count(db, in_status, (run_ids, "pending"), QUEUED)
        before = await _runyard_statements(http)
        gate.touch()
        await _until_count(db, in_status, (run_ids, "success"), QUEUED)
    after = await _runyard_statements(http)
    return (after - before) / QUEUED


async def test_claiming_costs_the_same_statements_with_1_group_and_with_50(
    grouped_server: tuple[str, str], tmp_path: Path
) -> None:
    """The Redis queue picks the group whose turn it is: the database sees the same claim,
    finish and next-run lookup per run however many groups wait."""
    url, database_url = grouped_server
    async with httpx.AsyncClient(base_url=url, timeout=60) as http:
        one = await _dispatch_statements(http, database_url, 1, tmp_path / "gate-1")
        fifty = await _dispatch_statements(http, database_url, 50, tmp_path / "gate-2")
        again = await _dispatch_statements(http, database_url, 1, tmp_path / "gate-3")
    print(
        f"Runyard statements per dispatched run: 1 group {one:.2f}, 50 groups {fifty:.2f}, "
        f"1 group again {again:.2f}"
    )
    assert 0 < one <= STATEMENTS_PER_RUN
    # The background loops (reaper, lease renewal, sweeper) add a few tenths per run at
    # random: a statement more per claim in 50 groups would add a whole one.
    assert abs(fifty - (one + again) / 2) < 0.5
