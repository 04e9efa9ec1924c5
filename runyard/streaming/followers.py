"""Which instances follow a stream: appends are announced only to those on other instances.

An instance that follows a stream key registers itself in Redis, in a hash beside the key
(`<key>:followers`, field: the instance, value: a generation). The append script announces
an append on the events channel only when an instance other than the appender's is in
that hash: the appender hands its own subscribers their events itself, and a run nobody
follows costs no announcement at all (a single instance never announces anything).

A registration is made in the same pipeline as, and before, the first read of the key
after it is followed, so every append is either in that read or sees the registration. It
expires unless refreshed (an instance that dies leaves nothing behind for long), and it is
withdrawn when the key is no longer followed, only if it is still the generation that was
registered: a withdrawal overtaken by a newer registration of the key does nothing.
"""

from __future__ import annotations

import itertools
import time
from typing import Any

from redis.asyncio import Redis

# How long a registration lives unless refreshed; it is refreshed after a third of that.
REGISTRATION_SECONDS = 60
REFRESH_AFTER_SECONDS = REGISTRATION_SECONDS / 3
# Withdrawals sent in one round trip.
WITHDRAW_BATCH = 200

_WITHDRAW = """
if redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then
  redis.call('HDEL', KEYS[1], ARGV[1])
end
return 0
"""


def followers_key(key: str) -> str:
    """The hash of the instances that follow stream `key`."""
    return f"{key}:followers"


class FollowerRegistry:
    """This instance's registrations: generations, refreshes and withdrawals."""

    def __init__(self, redis: Redis, instance: str) -> None:
        self.instance = instance
        self._generations = itertools.count(1)
        self._withdrawals: dict[str, int] = {}
        self._withdraw: Any = redis.register_script(_WITHDRAW)

    def generation(self, key: str) -> int:
        """A new generation for `key`, followed anew here (a pending withdrawal of an
        earlier one is dropped: the new registration replaces it)."""
        self._withdrawals.pop(key, None)
        return next(self._generations)

    def register(self, pipe: Any, key: str, generation: int) -> None:
        """Add the registration to `pipe`, ahead of the key's read."""
        hash_key = followers_key(key)
        pipe.hset(hash_key, self.instance, generation)
        pipe.expire(hash_key, REGISTRATION_SECONDS)

    @staticmethod
    def due(registered_at: float) -> bool:
        """Whether a registration made at `registered_at` (monotonic; 0: never) is to be
        made again."""
        return registered_at == 0 or time.monotonic() - registered_at > REFRESH_AFTER_SECONDS

    def withdraw(self, key: str, generation: int) -> None:
        """The key is no longer followed here: withdraw its registration (soon)."""
        self._withdrawals[key] = generation

    def withdrawing(self) -> bool:
        """Whether withdrawals wait to be sent."""
        return bool(self._withdrawals)

    async def send_withdrawals(self, redis: Redis) -> None:
        """Send waiting withdrawals in one round trip (they wait again if it fails)."""
        batch = dict(itertools.islice(self._withdrawals.items(), WITHDRAW_BATCH))
        for key in batch:
            del self._withdrawals[key]
        try:
            pipe = redis.pipeline(transaction=False)
            for key, generation in batch.items():
                await self._withdraw(
                    keys=[followers_key(key)], args=[self.instance, generation], client=pipe
                )
            await pipe.execute()
        except BaseException:
            for key, generation in batch.items():
                self._withdrawals.setdefault(key, generation)
            raise
