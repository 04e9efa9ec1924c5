"""A bounded hand-off from a stream's producers to its one consumer that holds nothing while
it is idle.

A thread stream joins its producers to its writer through a small queue, and an idle
client's queue is empty for hours. `asyncio.Queue` allocates three deques and an Event up
front, about 3 KiB per stream (tracemalloc, bench/README.md "Thousands of idle clients");
this one holds an empty list until something waits, and a future only while something does.
"""

from __future__ import annotations

import asyncio
from typing import Generic, TypeVar

T = TypeVar("T")


class Handoff(Generic[T]):
    """What asyncio.Queue(maxsize) offers a single consumer: `put` waits while `limit`
    items are held, `get` while none is; `get_nowait` raises asyncio.QueueEmpty."""

    __slots__ = ("_getter", "_items", "_limit", "_putters")

    def __init__(self, limit: int) -> None:
        self._items: list[T] = []
        self._limit = limit
        self._getter: asyncio.Future[None] | None = None
        self._putters: list[asyncio.Future[None]] | None = None

    def empty(self) -> bool:
        """Whether nothing is held."""
        return not self._items

    def qsize(self) -> int:
        """How many items are held."""
        return len(self._items)

    async def put(self, item: T) -> None:
        """Add an item, waiting while the hand-off is full."""
        while len(self._items) >= self._limit:
            waiter = asyncio.get_running_loop().create_future()
            if self._putters is None:
                self._putters = []
            self._putters.append(waiter)
            try:
                await waiter
            finally:
                if self._putters is not None and waiter in self._putters:
                    self._putters.remove(waiter)
        self._items.append(item)
        getter = self._getter
        if getter is not None and not getter.done():
            getter.set_result(None)

    async def get(self) -> T:
        """Take the oldest item, waiting for one (one consumer at a time)."""
        while not self._items:
            self._getter = asyncio.get_running_loop().create_future()
            try:
                await self._getter
            finally:
                self._getter = None
        return self.get_nowait()

    def get_nowait(self) -> T:
        """Take the oldest item; asyncio.QueueEmpty when none is held."""
        if not self._items:
            raise asyncio.QueueEmpty
        item = self._items.pop(0)
        # Every waiting producer looks again (a stream has one or two): none is left behind
        # by a wake-up that went to a producer cancelled meanwhile.
        putters, self._putters = self._putters, None
        for putter in putters or ():
            if not putter.done():
                putter.set_result(None)
        return item
