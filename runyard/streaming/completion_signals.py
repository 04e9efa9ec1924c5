"""Completion signals over Redis pub/sub: a run's end wakes its waiters on every instance."""

from __future__ import annotations

from redis.asyncio import Redis

from runyard.streaming.broker import LocalWaiters


class CompletionSignals(LocalWaiters):
    """Local waiters, resolved by `done` messages the shared pub/sub listener receives."""

    def __init__(self, redis: Redis, channel: str) -> None:
        super().__init__()
        self._redis = redis
        self.channel = channel

    async def publish(self, run_id: str) -> None:
        """Announce a run's completion to every instance (and resolve local waiters now)."""
        self.resolve(run_id)
        await self._redis.publish(self.channel, run_id)
