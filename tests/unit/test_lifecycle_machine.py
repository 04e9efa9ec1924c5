"""The run state machine driven in process, with no HTTP, on SQLite and PostgreSQL: creating
runs under each multitask strategy, claiming, finishing and handing back, and the typed
answers of the final writes. The first place a state-machine defect is reproduced."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from sqlalchemy.ext.asyncio import AsyncEngine

from runyard.db import runs as runs_db
from runyard.db import threads as threads_db
from runyard.db.engine import session_factory
from runyard.domain.errors import ConflictError
from runyard.domain.new_run import NewRun, NewThread, TargetThread
from runyard.domain.run import ClaimedRun, RunRecord
from runyard.domain.status import (
    CancelAction,
    MultitaskStrategy,
    RunStatus,
    ThreadStatus,
)
from runyard.domain.webhook_policy import WebhookPolicy
from runyard.lifecycle.final_writes import DONE, REFUSED, Written, overruled
from runyard.lifecycle.machine import RunLifecycle
from runyard.lifecycle.strategies import STRATEGY_RULES
from runyard.observability.metrics import Metrics
from runyard.outbound.guard import WebhookGuard
from runyard.queue.cancel_bus import InProcessCancelBus
from runyard.queue.run_queue import InProcessRunQueue
from runyard.streaming.broker import InMemoryEventBroker
from runyard.worker.webhooks import DeliveryOptions, WebhookSender
from tests.support.databases import migrated_engine

pytestmark = pytest.mark.timeout(60)
LEASE = 30.0


@dataclass
class Machine:
    """A lifecycle on a fresh database, and the stops its cancel bus was told."""

    engine: AsyncEngine
    lifecycle: RunLifecycle
    told: list[tuple[str, CancelAction]] = field(default_factory=list)

    async def run(self, run_id: str) -> RunRecord | None:
        async with session_factory(self.engine, autocommit=True)() as session:
            return await runs_db.get_run(session, run_id)

    async def thread_status(self, thread_id: str) -> str | None:
        async with session_factory(self.engine, autocommit=True)() as session:
            thread = await threads_db.get_thread(session, thread_id)
        return None if thread is None else thread.status


@pytest.fixture(params=["sqlite", "postgres"])
async def machine(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Machine]:
    async with migrated_engine(request.param, tmp_path) as engine:
        told: list[tuple[str, CancelAction]] = []

        def tell(run_id: str, action: CancelAction) -> bool:
            told.append((run_id, action))
            return False

        lifecycle = RunLifecycle(
            session_factory(engine),
            session_factory(engine, autocommit=True),
            engine.dialect.name,
            InMemoryEventBroker(60.0),
            InProcessRunQueue(),
            InProcessCancelBus(tell),
            WebhookSender(WebhookGuard(WebhookPolicy()), DeliveryOptions(enabled=False)),
            Metrics(in_flight=lambda: 0),
            InMemorySaver(),
        )
        yield Machine(engine, lifecycle, told)


@dataclass(frozen=True)
class Rows:
    """The row of a new run of assistant `a`, as a service builds it."""

    run_id: str
    strategy: MultitaskStrategy

    async def row(self, thread: TargetThread, scheduled_at: Any) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "thread_id": thread.thread_id,
            "assistant_id": "a",
            "metadata": {},
            "kwargs": {"graph_id": "a"},
            "multitask_strategy": self.strategy,
            "scheduled_at": scheduled_at,
            "attempt": 0,
            "temporary": False,
        }


async def create(
    machine: Machine, thread_id: str, strategy: MultitaskStrategy = MultitaskStrategy.ENQUEUE
) -> RunRecord:
    """A run created on `thread_id` (the thread made with it when missing), its strategy's
    effects carried out."""
    run_id = str(uuid.uuid4())
    created = await machine.lifecycle.create(
        NewRun(
            thread=NewThread(thread_id, {}),
            creates_thread=True,
            recreates_thread=True,
            strategy=strategy,
            after_seconds=None,
            idempotency_key=None,
            request_hash=None,
            assigned_priority=None,
            graph_metadata={},
            rows=Rows(run_id, strategy),
        )
    )
    await machine.lifecycle.after_strategy(created.effects)
    assert created.created and created.run.status == RunStatus.PENDING
    assert created.run.multitask_strategy is strategy
    return created.run


async def claimed(machine: Machine, run: RunRecord, owner: str = "instance-a") -> RunRecord:
    result = await machine.lifecycle.claim(run.run_id, owner, LEASE)
    assert isinstance(result, ClaimedRun)
    return result.run


def idle_state(thread_id: str) -> threads_db.ThreadState:
    return threads_db.ThreadState(thread_id, ThreadStatus.IDLE, {"x": 1}, {}, None)


def test_every_strategy_has_its_rule() -> None:
    assert set(STRATEGY_RULES) == set(MultitaskStrategy)


async def test_reject_refuses_a_second_run_naming_the_strategies_that_accept(
    machine: Machine,
) -> None:
    thread_id = str(uuid.uuid4())
    await create(machine, thread_id)
    with pytest.raises(ConflictError) as refused:
        await create(machine, thread_id, MultitaskStrategy.REJECT)
    assert "'enqueue', 'interrupt' or 'rollback'" in str(refused.value)


async def test_enqueue_leaves_the_active_run_and_queues_the_new_one(machine: Machine) -> None:
    thread_id = str(uuid.uuid4())
    first = await create(machine, thread_id)
    second = await create(machine, thread_id, MultitaskStrategy.ENQUEUE)
    for run_id in (first.run_id, second.run_id):
        queued = await machine.run(run_id)
        assert queued is not None and queued.status == RunStatus.PENDING
    assert machine.told == []


@pytest.mark.parametrize(
    ("strategy", "gone"),
    [(MultitaskStrategy.INTERRUPT, False), (MultitaskStrategy.ROLLBACK, True)],
)
async def test_a_stopping_strategy_ends_a_pending_run_at_once(
    machine: Machine, strategy: MultitaskStrategy, gone: bool
) -> None:
    thread_id = str(uuid.uuid4())
    first = await create(machine, thread_id)
    await create(machine, thread_id, strategy)
    left = await machine.run(first.run_id)
    if gone:
        assert left is None
    else:
        assert left is not None and left.status == RunStatus.INTERRUPTED
    assert machine.told == []


@pytest.mark.parametrize("strategy", [MultitaskStrategy.INTERRUPT, MultitaskStrategy.ROLLBACK])
async def test_a_stopping_strategy_flags_a_running_run_and_tells_its_executor(
    machine: Machine, strategy: MultitaskStrategy
) -> None:
    thread_id = str(uuid.uuid4())
    running = await claimed(machine, await create(machine, thread_id))
    await create(machine, thread_id, strategy)
    stop = STRATEGY_RULES[strategy].stop
    assert stop is not None
    flagged = await machine.run(running.run_id)
    assert flagged is not None and flagged.cancel_action is stop
    assert machine.told == [(running.run_id, stop)]


async def test_finish_is_done_once_and_refused_to_a_stale_attempt(machine: Machine) -> None:
    thread_id = str(uuid.uuid4())
    run = await claimed(machine, await create(machine, thread_id))
    state = idle_state(thread_id)
    done = await machine.lifecycle.finish(run, run.attempt, RunStatus.SUCCESS, {}, None, state)
    assert done == DONE and done.done
    stale = await machine.lifecycle.finish(run, run.attempt + 1, RunStatus.ERROR, None, {}, state)
    assert stale == REFUSED and not stale.done
    ended = await machine.run(run.run_id)
    assert ended is not None and ended.status == RunStatus.SUCCESS
    assert await machine.thread_status(thread_id) == ThreadStatus.IDLE


async def test_a_stronger_stop_recorded_first_overrules_the_final_write(
    machine: Machine,
) -> None:
    thread_id = str(uuid.uuid4())
    run = await claimed(machine, await create(machine, thread_id))
    stopped = await machine.lifecycle.cancel(run, CancelAction.ROLLBACK)
    assert stopped.stopping_with is CancelAction.ROLLBACK
    state = idle_state(thread_id)
    # The graph's own end, then an interrupt's end: both weaker than the rollback.
    for stop in (None, CancelAction.INTERRUPT):
        written = await machine.lifecycle.finish(
            run, run.attempt, RunStatus.SUCCESS, {}, None, state, stop=stop
        )
        assert written == overruled(CancelAction.ROLLBACK)
        assert written.written is Written.OVERRULED and not written.done
    still = await machine.run(run.run_id)
    assert still is not None and still.status == RunStatus.RUNNING
    # The rollback's own end is written.
    assert await machine.lifecycle.finish_rolled_back(
        run, run.attempt, RunStatus.INTERRUPTED, state
    )
    assert await machine.run(run.run_id) is None


async def test_hand_back_is_done_refused_or_overruled(machine: Machine) -> None:
    thread_id = str(uuid.uuid4())
    run = await claimed(machine, await create(machine, thread_id))
    assert await machine.lifecycle.release(run.run_id, run.attempt) == DONE
    assert await machine.lifecycle.release(run.run_id, run.attempt) == REFUSED
    again = await claimed(machine, run, owner="instance-b")
    assert again.attempt == run.attempt + 1
    await machine.lifecycle.cancel(again, CancelAction.INTERRUPT)
    released = await machine.lifecycle.release(again.run_id, again.attempt)
    assert released == overruled(CancelAction.INTERRUPT)
