"""Waiting for something that must end before an alarm goes off (a fallback timer fired)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")


async def ended_before(
    work: Awaitable[T], alarm: asyncio.Event, why: Callable[[], str], timeout: float
) -> T:
    """`work`'s result once it ends; an AssertionError saying `why()` if `alarm` is set first,
    and one if neither happens within `timeout` seconds. `work` is cancelled if unfinished."""
    task = asyncio.ensure_future(work)
    alarmed = asyncio.ensure_future(alarm.wait())
    try:
        await asyncio.wait({task, alarmed}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        assert not alarm.is_set(), why()
        assert task.done(), f"still going after {timeout} s"
        return task.result()
    finally:
        for pending in (task, alarmed):
            pending.cancel()
        await asyncio.gather(task, alarmed, return_exceptions=True)
