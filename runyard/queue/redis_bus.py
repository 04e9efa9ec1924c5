"""Cross-instance notifications over Redis pub/sub: cancels and run completions."""

from __future__ import annotations

import asyncio
import logging

from redis.asyncio import Redis
from redis.exceptions import RedisError

from runyard.domain.status import CancelAction
from runyard.queue.cancel_bus import CancelHandler
from runyard.streaming.redis_broker import CompletionSignals

log = logging.getLogger("runyard.bus")


# How long a cancel's sender waits for the executing instance to say it stopped the run.
# The listener acts as soon as the message arrives, so an acknowledgement takes
# milliseconds; waiting it out means no instance executes the run (its instance died).
CANCEL_ACK_SECONDS = 1.0
# The acknowledgement outlives any wait for it, then goes.
_ACK_TTL_SECONDS = 10


def cancel_ack_key(channel: str, run_id: str) -> str:
    """The list the executing instance pushes to once it stopped the run."""
    return f"{channel}:ack:{run_id}"


class RedisCancelBus:
    """PUBLISH a cancel to every instance; the executing one stops the run and says so."""

    def __init__(
        self,
        redis: Redis,
        channel: str,
        local: CancelHandler,
        ack_seconds: float = CANCEL_ACK_SECONDS,
    ) -> None:
        self._redis = redis
        self.channel = channel
        self._local = local
        self._ack_seconds = ack_seconds

    async def publish(self, run_id: str, action: CancelAction) -> bool:
        """Stop the run here if it executes here, else tell every instance and wait for the
        one that executes it to acknowledge; True only when an executor stopped it.

        Counting the instances subscribed is no answer: the sender's own listener is one of
        them, and every instance listens whether or not it executes the run.
        """
        if self._local(run_id, action):
            return True
        ack = cancel_ack_key(self.channel, run_id)
        try:
            pipe = self._redis.pipeline(transaction=False)
            pipe.delete(ack)
            pipe.publish(self.channel, f"{run_id} {action.value}")
            _, receivers = await pipe.execute()
            if not receivers:
                return False
            acknowledged = await self._redis.blpop([ack], timeout=self._ack_seconds)
        except (RedisError, OSError) as exc:
            # The cancel flag is already in the database: the lease renewal applies it.
            log.warning("cancel_publish_failed run_id=%s error=%s", run_id, exc)
            return False
        return acknowledged is not None

    async def close(self) -> None:
        """Nothing owned here."""


class NotificationListener:
    """One pub/sub connection per instance, dispatching cancels and completion signals."""

    def __init__(
        self,
        redis: Redis,
        cancel_channel: str,
        local_cancel: CancelHandler,
        signals: CompletionSignals,
    ) -> None:
        self._redis = redis
        self._cancel_channel = cancel_channel
        self._local_cancel = local_cancel
        self._signals = signals
        self.connected = asyncio.Event()

    async def run_forever(self, stop: asyncio.Event) -> None:
        """Listen until `stop`; reconnect with backoff, waking waiters after a gap."""
        delay = 0.2
        while not stop.is_set():
            try:
                await self._listen(stop)
                delay = 0.2
            except (RedisError, OSError) as exc:
                self.connected.clear()
                log.warning("notifications_disconnected error=%s retry_in=%.1fs", exc, delay)
                try:
                    await asyncio.wait_for(stop.wait(), delay)
                except TimeoutError:
                    pass
                delay = min(delay * 2, 5.0)

    async def _cancel(self, data: str) -> None:
        """A cancel message ("run_id action"): stop the run if it executes here, and say so."""
        run_id, _, word = data.partition(" ")
        try:
            action = CancelAction(word) if word else CancelAction.INTERRUPT
        except ValueError:
            # Not a stop this version knows: the run's cancel flag in the database, which
            # its lease renewal reads, still reaches it.
            log.warning("cancel_message_unknown run_id=%s action=%s", run_id, word)
            return
        if self._local_cancel(run_id, action):
            await self._acknowledge(run_id)

    async def _listen(self, stop: asyncio.Event) -> None:
        pubsub = self._redis.pubsub(ignore_subscribe_messages=True)
        try:
            await pubsub.subscribe(self._cancel_channel, self._signals.channel)
            self.connected.set()
            # Messages may have been missed while disconnected: let waiters re-check.
            self._signals.resolve_all()
            while not stop.is_set():
                message = await pubsub.get_message(timeout=1.0)
                if message is None:
                    continue
                channel = _text(message["channel"])
                data = _text(message["data"])
                if channel == self._cancel_channel:
                    await self._cancel(data)
                else:
                    self._signals.resolve(data)
        finally:
            self.connected.clear()
            try:
                await pubsub.aclose()
            except (RedisError, OSError):
                pass

    async def _acknowledge(self, run_id: str) -> None:
        """Tell the cancel's sender that the run stopped here."""
        ack = cancel_ack_key(self._cancel_channel, run_id)
        try:
            pipe = self._redis.pipeline(transaction=True)
            pipe.rpush(ack, "stopped")
            pipe.expire(ack, _ACK_TTL_SECONDS)
            await pipe.execute()
        except (RedisError, OSError) as exc:
            # The run is stopped all the same; its sender reports the cancel as recorded.
            log.warning("cancel_ack_failed run_id=%s error=%s", run_id, exc)


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
