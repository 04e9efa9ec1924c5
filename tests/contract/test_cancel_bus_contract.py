"""The cancel bus contract, run against the in-process and the Redis implementation.

`publish` returns True only when an executor acted on the cancel: the API answers
"delivered" with it, and "recorded, stops at the next lease renewal" without. The Redis bus
reaches every instance; in-process there is one, so the tests of several instances run on
Redis alone.
"""

from __future__ import annotations

import asyncio

import pytest
from redis.asyncio import Redis

from runyard.domain.status import CancelAction
from runyard.queue.redis_bus import RedisCancelBus
from runyard.worker.registry import RunningRuns
from tests.support.cancel_buses import CancelBuses

pytestmark = pytest.mark.timeout(30)


async def _stopped(task: asyncio.Task[None]) -> bool:
    """Whether the task ends (cancelled) within a few seconds."""
    try:
        await asyncio.wait_for(asyncio.shield(task), 5)
    except asyncio.CancelledError:
        return True
    except TimeoutError:
        return False
    return False


def _several_instances(buses: CancelBuses) -> None:
    if buses.one_process:
        pytest.skip("in-process there is one instance: no other to reach or to spare")


async def test_a_cancel_stops_the_run_executing_where_it_is_sent(cancel_buses: CancelBuses) -> None:
    here = await cancel_buses.instance()
    task = here.execute("r1")
    assert await here.bus.publish("r1", CancelAction.ROLLBACK) is True
    assert await _stopped(task)
    assert here.running.all()[0].stop_reason == "rollback"


async def test_a_cancel_of_a_run_executing_nowhere_is_not_delivered(
    cancel_buses: CancelBuses,
) -> None:
    here = await cancel_buses.instance()
    other = here.execute("busy")
    assert await here.bus.publish("nowhere", CancelAction.INTERRUPT) is False
    assert not other.done()


async def test_a_run_that_already_ended_is_not_reported_stopped(cancel_buses: CancelBuses) -> None:
    here = await cancel_buses.instance()
    task = here.execute("ended")
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert await here.bus.publish("ended", CancelAction.INTERRUPT) is False


async def test_a_cancel_reaches_the_instance_that_executes_the_run(
    cancel_buses: CancelBuses,
) -> None:
    _several_instances(cancel_buses)
    sender, executor = await cancel_buses.instance(), await cancel_buses.instance()
    task = executor.execute("r2")
    assert await sender.bus.publish("r2", CancelAction.INTERRUPT) is True
    assert await _stopped(task)
    assert executor.running.all()[0].stop_reason == "interrupt"


async def test_a_cancel_leaves_the_runs_of_other_instances_alone(cancel_buses: CancelBuses) -> None:
    _several_instances(cancel_buses)
    sender, first, second = [await cancel_buses.instance() for _ in range(3)]
    target = first.execute("r3")
    bystander = second.execute("r4")
    neighbour = first.execute("r5")
    assert await sender.bus.publish("r3", CancelAction.INTERRUPT) is True
    assert await _stopped(target)
    await asyncio.sleep(0.1)  # anything else the message could have stopped has had its turn
    assert not bystander.done() and not neighbour.done()


async def test_a_cancel_nobody_listens_to_is_not_delivered(redis: Redis) -> None:
    """Redis up, no instance subscribed (all gone): recorded in the database, not delivered."""
    bus = RedisCancelBus(redis, "contract-nobody:cancel", RunningRuns().stop)
    assert await bus.publish("r6", CancelAction.INTERRUPT) is False


async def test_a_cancel_redis_refuses_is_not_delivered_and_not_an_error() -> None:
    unreachable = Redis.from_url("redis://127.0.0.1:1/0", socket_connect_timeout=1)
    try:
        bus = RedisCancelBus(unreachable, "contract-down:cancel", RunningRuns().stop)
        assert await bus.publish("r7", CancelAction.INTERRUPT) is False
    finally:
        await unreachable.aclose()
