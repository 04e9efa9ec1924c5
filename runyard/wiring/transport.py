"""What carries runs and their events: the broker, the run queue and the cancel bus.

With `REDIS_URL`, Redis connections and the two loops that read them (the stream reader and
the notification listener); without, their in-process counterparts. The Redis loops are
started in a group whose stop the caller's exit stack runs before it closes the connections.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from runyard.db.engine import Sessions
from runyard.db.run_claims import find_claimable_run
from runyard.domain.group_caps import GroupCaps
from runyard.domain.urls import masked_url
from runyard.loops import LoopGroup
from runyard.queue.cancel_bus import CancelBus, CancelHandler, InProcessCancelBus
from runyard.queue.run_queue import InProcessRunQueue, RunQueue
from runyard.settings import Settings
from runyard.streaming.broker import EventBroker, InMemoryEventBroker

if TYPE_CHECKING:
    from runyard.queue.redis_connections import RedisConnections

log = logging.getLogger("runyard.runtime")


@dataclass
class Transport:
    """The broker, queue and cancel bus; `redis` is the request client (None in-process)."""

    broker: EventBroker
    queue: RunQueue
    cancel_bus: CancelBus
    redis: Any = None


async def open_transport(
    settings: Settings,
    stack: AsyncExitStack,
    loop_group: Callable[[str, float], LoopGroup],
    stop_run: CancelHandler,
    sessions: Sessions,
    instance_id: str,
    caps: GroupCaps,
) -> Transport:
    """Redis's transport with `REDIS_URL` (see `open_redis_transport`), else in-process."""
    if settings.redis_url:
        return await open_redis_transport(
            settings, stack, loop_group, stop_run, sessions, instance_id, caps
        )
    return in_process_transport(settings, stop_run, caps)


def in_process_transport(settings: Settings, stop_run: CancelHandler, caps: GroupCaps) -> Transport:
    """The single-process transport (`runyard dev`, or `runyard serve` without Redis)."""
    return Transport(
        InMemoryEventBroker(settings.event_retention_seconds),
        InProcessRunQueue(caps),
        InProcessCancelBus(stop_run),
    )


async def open_redis_transport(
    settings: Settings,
    stack: AsyncExitStack,
    loop_group: Callable[[str, float], LoopGroup],
    stop_run: CancelHandler,
    sessions: Sessions,
    instance_id: str,
    caps: GroupCaps,
) -> Transport:
    """Redis connections (closed by `stack`), then the loops that read them.

    `loop_group(name)` makes a group whose stop is pushed on `stack` when it is made: made
    after the connections, its loops stop before they close.
    """
    from runyard.queue.redis_bus import NotificationListener, RedisCancelBus
    from runyard.queue.redis_connections import RedisConnections
    from runyard.streaming.redis_broker import CompletionSignals, RedisEventBroker
    from runyard.streaming.redis_reader import StreamReader

    assert settings.redis_url is not None
    prefix = settings.redis_prefix
    redis = RedisConnections.open(
        settings.redis_url,
        prefix,
        stream_readers=settings.redis_stream_readers,
        worker_loops=settings.worker_count,
        worker_connections=settings.redis_worker_connections,
        request_connections=settings.redis_request_connections,
    )
    stack.push_async_callback(redis.aclose)
    # Readers only, stopped once the workers have drained: nothing to finish, so they are
    # cancelled at once rather than left to notice the stop at their next read timeout (1 s).
    listeners = loop_group("redis-listeners", 0.0)
    signals = CompletionSignals(redis.worker, f"{prefix}done")
    reader = StreamReader(
        redis.blocking, f"{prefix}events", settings.redis_stream_readers, 5.0, instance=instance_id
    )
    listeners.start("stream-reader", reader.run_forever)
    broker = RedisEventBroker(
        redis.worker,
        prefix,
        signals,
        settings.event_retention_seconds,
        reader=reader,
        reads=redis.requests,
        append_retry_seconds=settings.lease_duration_seconds,
    )

    queue = _fallback_queue(redis, prefix, settings, sessions, caps)
    cancel_bus = RedisCancelBus(redis.requests, f"{prefix}cancel", stop_run)
    listener = NotificationListener(redis.blocking, f"{prefix}cancel", stop_run, signals)
    listeners.start("notifications", listener.run_forever)
    try:
        await asyncio.wait_for(listener.connected.wait(), timeout=5)
    except TimeoutError:
        log.warning("notifications_not_connected_at_start redis=%s", masked_url(settings.redis_url))
    return Transport(broker, queue, cancel_bus, redis.requests)


def _fallback_queue(
    redis: RedisConnections, prefix: str, settings: Settings, sessions: Sessions, caps: GroupCaps
) -> RunQueue:
    """The Redis queue; while Redis is unreachable, workers find work in the database."""
    from runyard.queue.redis_queue import DatabaseFallbackQueue, RedisRunQueue

    async def claimable(skipped_groups: list[str]) -> str | None:
        async with sessions() as session, session.begin():
            return await find_claimable_run(session, skipped_groups)

    return DatabaseFallbackQueue(
        RedisRunQueue(redis.requests, prefix, blocking=redis.blocking, caps=caps),
        claimable,
        settings.postgres_poll_interval_seconds,
    )
