"""Per-group caps in the claim itself, on a real database: claims racing for a capped
group's last places, the reason a held run shows, and the statements a claim costs."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from runyard.db import run_attempts as attempts_db
from runyard.db import runs as runs_db
from runyard.db import threads as threads_db
from runyard.db.engine import session_factory
from runyard.db.tables import runs
from runyard.domain.group_caps import RATE_HOLD_MAX_SECONDS, GroupCap, GroupCaps, HeldBack
from runyard.domain.run import ClaimedRun
from runyard.domain.status import RunStatus
from runyard.domain.webhook_policy import WebhookPolicy
from runyard.lifecycle.machine import RunLifecycle
from runyard.observability.metrics import Metrics
from runyard.outbound.guard import WebhookGuard
from runyard.queue.cancel_bus import InProcessCancelBus
from runyard.queue.run_queue import InProcessRunQueue
from runyard.streaming.broker import InMemoryEventBroker
from runyard.worker.webhooks import DeliveryOptions, WebhookSender
from tests.support.databases import Counted
from tests.support.rows import run_row, thread_row

pytestmark = pytest.mark.timeout(60)

CAPS = GroupCaps(
    overrides={"capped": GroupCap(max_running=3), "rated": GroupCap(max_starts_per_minute=2)}
)


@pytest.fixture
def database(counted_database: Counted) -> Counted:
    """A fresh, migrated database of each backend, its statements counted."""
    return counted_database


def lifecycle(engine: AsyncEngine, caps: GroupCaps) -> RunLifecycle:
    """One instance's run state machine on `engine`."""
    return RunLifecycle(
        session_factory(engine),
        session_factory(engine, autocommit=True),
        engine.dialect.name,
        InMemoryEventBroker(60.0),
        InProcessRunQueue(),
        InProcessCancelBus(lambda run_id, action: False),
        WebhookSender(WebhookGuard(WebhookPolicy()), DeliveryOptions(enabled=False)),
        Metrics(in_flight=lambda: 0),
        InMemorySaver(),
        caps=caps,
    )


async def pending_runs(engine: AsyncEngine, group: str, count: int) -> list[str]:
    """`count` pending runs of `group`, each on a thread of its own, oldest first."""
    made = []
    for _ in range(count):
        thread_id, run_id = str(uuid.uuid4()), str(uuid.uuid4())
        async with session_factory(engine)() as session, session.begin():
            await threads_db.insert_thread(session, thread_row(thread_id))
            await runs_db.insert_run(
                session, {**run_row(run_id, thread_id), "fairness_group": group}
            )
        made.append(run_id)
    return made


async def stored(engine: AsyncEngine, run_ids: list[str]) -> dict[str, Any]:
    """Each run's status and held_back as stored."""
    async with engine.connect() as conn:
        rows = await conn.execute(
            select(runs.c.run_id, runs.c.status, runs.c.held_back).where(runs.c.run_id.in_(run_ids))
        )
        return {row.run_id: (row.status, row.held_back) for row in rows}


async def test_racing_claims_never_take_more_than_the_cap(database: Counted) -> None:
    engine = database.engine
    backlog = await pending_runs(engine, "capped", 12)
    # Two instances on PostgreSQL (their claims are serialized by the database); SQLite is
    # one process (`runyard dev`): one lifecycle.
    postgres = engine.dialect.name == "postgresql"
    instances = [lifecycle(engine, CAPS) for _ in range(2 if postgres else 1)]
    results = await asyncio.gather(
        *(
            instances[n % len(instances)].claim(run_id, f"instance-{n % 2}", 30.0)
            for n, run_id in enumerate(backlog)
        )
    )
    claimed = [result.run for result in results if isinstance(result, ClaimedRun)]
    held = [result for result in results if isinstance(result, HeldBack)]
    assert len(claimed) == 3 and len(held) == 9
    assert {h.group for h in held} == {"capped"} and all(h.seconds > 0 for h in held)
    rows = await stored(engine, backlog)
    assert sum(status == "running" for status, _ in rows.values()) == 3
    reasons = {reason for status, reason in rows.values() if status == "pending"}
    assert reasons == {"fairness group 'capped' is at its max_running (3)"}

    # One ends: the next claim takes a place and clears that run's reason.
    first = claimed[0]
    async with session_factory(engine)() as session, session.begin():
        await attempts_db.finish_run(
            session, first.run_id, first.attempt, RunStatus.SUCCESS, None, None
        )
    again = await instances[0].claim(held[0].run_id, "instance-0", 30.0)
    assert isinstance(again, ClaimedRun) and again.run.held_back is None
    assert isinstance(await instances[-1].claim(held[1].run_id, "instance-1", 30.0), HeldBack)
    rows = await stored(engine, backlog)
    assert rows[held[0].run_id] == ("running", None)
    assert sum(status == "running" for status, _ in rows.values()) == 3


async def test_starts_per_minute_hold_until_the_window_frees(database: Counted) -> None:
    engine = database.engine
    backlog = await pending_runs(engine, "rated", 3)
    instance = lifecycle(engine, CAPS)
    for run_id in backlog[:2]:
        taken = await instance.claim(run_id, "instance-0", 30.0)
        assert isinstance(taken, ClaimedRun)
        # Ended at once: only starts count against this cap.
        async with session_factory(engine)() as session, session.begin():
            await attempts_db.finish_run(
                session, run_id, taken.run.attempt, RunStatus.SUCCESS, None, None
            )
    held = await instance.claim(backlog[2], "instance-0", 30.0)
    assert isinstance(held, HeldBack)
    # Skipped a while (the window frees in about a minute), not spun on.
    assert held.seconds == RATE_HOLD_MAX_SECONDS
    assert (await stored(engine, [backlog[2]]))[backlog[2]] == (
        "pending",
        "fairness group 'rated' is at its max_starts_per_minute (2)",
    )


async def test_a_group_without_a_cap_is_claimed_as_before(database: Counted) -> None:
    engine = database.engine
    (free,) = await pending_runs(engine, "free", 1)
    taken = await lifecycle(engine, CAPS).claim(free, "instance-0", 30.0)
    assert isinstance(taken, ClaimedRun) and taken.run.status == "running"


async def claim_statements(database: Counted, caps: GroupCaps, group: str) -> int:
    (run_id,) = await pending_runs(database.engine, group, 1)
    instance = lifecycle(database.engine, caps)
    before = database.statements
    assert isinstance(await instance.claim(run_id, "instance-0", 30.0), ClaimedRun)
    return database.statements - before


async def test_a_claim_costs_the_same_handful_of_statements_whatever_the_groups(
    database: Counted,
) -> None:
    postgres = database.engine.dialect.name == "postgresql"
    # No cap configured: the claim is exactly what it was (one statement on PostgreSQL).
    assert await claim_statements(database, GroupCaps(), "capped") == (1 if postgres else 2)
    # Capped: the run's group, the group's lock (PostgreSQL), its load, the claim.
    one_group = await claim_statements(database, CAPS, "capped")
    for n in range(50):
        await pending_runs(database.engine, f"group-{n}", 2)
    many_groups = await claim_statements(database, CAPS, "capped")
    print(f"statements per capped claim: {one_group}")
    assert one_group == many_groups <= 6
