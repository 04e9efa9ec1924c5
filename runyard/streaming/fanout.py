"""One source, many subscribers in this process: each subscriber holds a bounded buffer.

Hundreds of streams of one thread used to read every run's events each on their own: one
subscription, one replay read (on Redis, one round trip), one task hop per event and per
stream, all at once whenever a run arrived, so a few hundred clients that never read slowed
every run of the thread. A `Fanout` reads once and hands what it reads to every member's
buffer (references to the same events, no copy). A member whose buffer would overflow (its
client stopped reading) is detached, its buffer dropped: it goes on alone from where it is,
by id, and nobody waits for it. When the source ends, every member is told so and goes on
alone too.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Hashable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Generic, TypeVar

log = logging.getLogger("runyard.streams")

T = TypeVar("T")

# Items a member may have waiting before it is detached.
MEMBER_BUFFER_ITEMS = 1024
# The source's position while it delivers: no stream joining now starts where it is.
BUSY = object()


class Member(Generic[T]):
    """A subscriber's share of a fan-out: a bounded buffer of items."""

    def __init__(self, limit: int, fanout: Fanout[T] | None = None) -> None:
        self._limit = limit
        self._fanout = fanout
        self._items: list[T] = []
        self._ready = asyncio.Event()
        self.detached = False
        self.ended = False

    def offer(self, items: Sequence[T]) -> bool:
        """Buffer items; False (the buffer dropped, the member detached) on overflow."""
        if len(self._items) + len(items) > self._limit:
            self._items = []
            self.detached = True
            self._ready.set()
            return False
        self._items.extend(items)
        self._ready.set()
        return True

    def sharing(self) -> int:
        """How many members the fan-out has now (this one included)."""
        return len(self._fanout.members) if self._fanout is not None else 1

    def end(self) -> None:
        """The source ended: the member takes what is buffered, then goes on alone."""
        self.ended = True
        self._ready.set()

    async def take(self) -> list[T] | None:
        """Everything buffered, waiting for something; None once detached or ended."""
        while not self._items:
            if self.detached or self.ended:
                return None
            self._ready.clear()
            await self._ready.wait()
        items, self._items = self._items, []
        return items


class Fanout(Generic[T]):
    """One source's members, and where the source is (`position`, set by the source)."""

    def __init__(self, position: Hashable) -> None:
        self.position: Hashable | object = position
        self.members: set[Member[T]] = set()
        self.task: asyncio.Task[None] | None = None

    def publish(self, items: Sequence[T]) -> None:
        """Hand items to every member; a member that overflows is dropped."""
        for member in list(self.members):
            if not member.offer(items):
                self.members.discard(member)

    def end(self) -> None:
        """Tell every member the source ended."""
        for member in self.members:
            member.end()
        self.members.clear()


Source = Callable[[Fanout[T]], Awaitable[None]]


class Fanouts(Generic[T]):
    """This process's fan-outs by key, each read by one task while it has members."""

    def __init__(self, limit: int = MEMBER_BUFFER_ITEMS) -> None:
        self._limit = limit
        self._fanouts: dict[str, Fanout[T]] = {}

    def active(self) -> int:
        """How many fan-outs have a source running now."""
        return len(self._fanouts)

    def join(
        self, key: str, position: Hashable, source: Source[T]
    ) -> AbstractAsyncContextManager[Member[T]] | None:
        """Membership of `key`'s fan-out for the caller's lifetime, if its source is at
        `position` (a new fan-out starts `source` there); None when it is elsewhere: the
        caller reads alone."""
        fanout = self._fanouts.get(key)
        if fanout is None:
            fanout = self._fanouts[key] = Fanout(position)
            fanout.task = asyncio.create_task(self._read(key, fanout, source), name="fanout")
        elif fanout.position != position:
            return None
        member: Member[T] = Member(self._limit, fanout)
        fanout.members.add(member)
        return self._membership(key, fanout, member)

    @asynccontextmanager
    async def _membership(
        self, key: str, fanout: Fanout[T], member: Member[T]
    ) -> AsyncIterator[Member[T]]:
        try:
            yield member
        finally:
            fanout.members.discard(member)
            if not fanout.members and fanout.task is not None and not fanout.task.done():
                self._forget(key, fanout)
                fanout.task.cancel()
                await asyncio.gather(fanout.task, return_exceptions=True)

    async def _read(self, key: str, fanout: Fanout[T], source: Source[T]) -> None:
        try:
            await source(fanout)
        except asyncio.CancelledError:
            raise
        except Exception:
            # Each member goes on alone from where it is, and meets the failure itself.
            log.warning("fanout_source_failed key=%s", key, exc_info=True)
        finally:
            self._forget(key, fanout)
            fanout.end()

    def _forget(self, key: str, fanout: Fanout[T]) -> None:
        if self._fanouts.get(key) is fanout:
            del self._fanouts[key]

    async def stop(self) -> None:
        """Stop every source (at shutdown); their members go on alone or end."""
        fanouts = list(self._fanouts.values())
        self._fanouts.clear()
        tasks = [fanout.task for fanout in fanouts if fanout.task is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
