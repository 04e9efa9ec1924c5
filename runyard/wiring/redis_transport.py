"""The Redis transport: Redis connections (closed in the close-transport phase), then the
loops that read them (the stream reader and the notification listener), the Redis broker, the
run queue with its database fallback, the cancel bus, and the readiness probe of Redis.
Registered as `redis` in runyard/wiring/transport.py."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from redis.asyncio import Redis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from runyard.db.engine import Sessions
from runyard.db.run_claims import find_claimable_run
from runyard.domain.group_caps import GroupCaps
from runyard.domain.urls import masked_url
from runyard.queue.redis_bus import NotificationListener, RedisCancelBus
from runyard.queue.redis_connections import RedisConnections
from runyard.queue.redis_queue import DatabaseFallbackQueue, RedisRunQueue
from runyard.queue.run_queue import RunQueue
from runyard.settings import Settings
from runyard.streaming.redis_broker import CompletionSignals, RedisEventBroker
from runyard.streaming.redis_reader import StreamReader
from runyard.wiring.transport_contract import Transport, TransportNeeds

log = logging.getLogger("runyard.runtime")


@dataclass(frozen=True)
class RedisProbe:
    """Readiness: Redis answers a PING on the request client."""

    client: Redis
    name: str = "redis"

    async def ping(self) -> None:
        """Return when Redis answers."""
        await self.client.ping()


async def open_redis_transport(needs: TransportNeeds) -> Transport:
    """Redis connections (closed on `needs.stack`), then the loops that read them, made
    after the connections so they stop before those close."""
    settings, prefix = needs.settings, needs.settings.redis_prefix
    assert settings.redis_url is not None
    redis = RedisConnections.open(
        settings.redis_url,
        prefix,
        stream_readers=settings.redis_stream_readers,
        worker_loops=settings.worker_count,
        worker_connections=settings.redis_worker_connections,
        request_connections=settings.redis_request_connections,
    )
    needs.stack.push_async_callback(redis.aclose)
    # Readers only, stopped once the workers have drained: nothing to finish, so they are
    # cancelled at once rather than left to notice the stop at their next read timeout (1 s).
    listeners = needs.loop_group("redis-listeners", 0.0)
    signals = CompletionSignals(redis.worker, f"{prefix}done")
    reader = StreamReader(
        redis.blocking,
        f"{prefix}events",
        settings.redis_stream_readers,
        5.0,
        instance=needs.instance_id,
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
    queue = _fallback_queue(redis, prefix, settings, needs.sessions, needs.caps)
    cancel_bus = RedisCancelBus(redis.requests, f"{prefix}cancel", needs.stop_run)
    listener = NotificationListener(redis.blocking, f"{prefix}cancel", needs.stop_run, signals)
    listeners.start("notifications", listener.run_forever)
    try:
        await asyncio.wait_for(listener.connected.wait(), timeout=5)
    except TimeoutError:
        log.warning("notifications_not_connected_at_start redis=%s", masked_url(settings.redis_url))
    probes = (RedisProbe(redis.requests),)
    outages = (RedisConnectionError, RedisTimeoutError)
    return Transport(broker, queue, cancel_bus, probes, shared=True, outage_errors=outages)


def _fallback_queue(
    redis: RedisConnections, prefix: str, settings: Settings, sessions: Sessions, caps: GroupCaps
) -> RunQueue:
    """The Redis queue; while Redis is unreachable, workers find work in the database."""

    async def claimable(skipped_groups: list[str]) -> str | None:
        async with sessions() as session, session.begin():
            return await find_claimable_run(session, skipped_groups)

    return DatabaseFallbackQueue(
        RedisRunQueue(redis.requests, prefix, blocking=redis.blocking, caps=caps),
        claimable,
        settings.postgres_poll_interval_seconds,
    )
