"""The console's snapshot is shared: however many consoles ask at once, the database is read
once per SNAPSHOT_SECONDS."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from runyard.services.console import SNAPSHOT_SECONDS, ConsoleService


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class CountedConsole(ConsoleService):
    """A console whose snapshots are counted instead of read from a database."""

    computed = 0

    async def _compute(self) -> Any:
        self.computed += 1
        await asyncio.sleep(0.01)
        return object()


@pytest.mark.timeout(10)
async def test_many_viewers_share_one_snapshot() -> None:
    clock = Clock()
    service = CountedConsole(None, False, 2.0, "me", None, clock)  # type: ignore[arg-type]
    first = await asyncio.gather(*(service.snapshot() for _ in range(50)))
    assert service.computed == 1 and all(s is first[0] for s in first)
    clock.now += SNAPSHOT_SECONDS / 2
    assert await service.snapshot() is first[0] and service.computed == 1
    clock.now += SNAPSHOT_SECONDS
    assert await service.snapshot() is not first[0] and service.computed == 2
