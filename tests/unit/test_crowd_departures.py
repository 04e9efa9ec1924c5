"""What a crowd of event streams leaves behind is given back once, after it has left; a
server with ordinary traffic never trims."""

from __future__ import annotations

import asyncio
import sys

import pytest

from runyard.streaming.closing import StreamsClosing
from runyard.streaming.departures import CrowdDepartures, trim_heap

pytestmark = pytest.mark.timeout(10)


class Trims:
    """A trim that records its calls and what the registry held when it ran."""

    def __init__(self) -> None:
        self.calls = 0
        self.done = asyncio.Event()

    def __call__(self) -> bool:
        self.calls += 1
        self.done.set()
        return True


def callbacks(count: int) -> list[object]:
    return [lambda: None for _ in range(count)]


async def test_a_crowd_that_leaves_is_trimmed_after_once_and_its_registry_rebuilt() -> None:
    trims = Trims()
    closing = StreamsClosing(CrowdDepartures(crowd=20, settle_seconds=0.05, trim=trims))
    streams = callbacks(40)
    for stream in streams:
        closing.watch(stream)  # type: ignore[arg-type]
    grown = sys.getsizeof(closing._callbacks)
    for stream in streams[:35]:
        closing.forget(stream)  # type: ignore[arg-type]
    await asyncio.wait_for(trims.done.wait(), 5)
    # The last departures re-armed the one trim: it ran once, after all of them.
    assert trims.calls == 1
    assert sys.getsizeof(closing._callbacks) < grown
    # The streams still open are still ended at shutdown.
    ended: list[int] = []
    closing.watch(lambda: ended.append(1))
    closing.close()
    assert ended == [1]


async def test_streams_below_a_crowd_never_trim() -> None:
    trims = Trims()
    closing = StreamsClosing(CrowdDepartures(crowd=50, settle_seconds=0.01, trim=trims))
    for _ in range(3):
        streams = callbacks(49)
        for stream in streams:
            closing.watch(stream)  # type: ignore[arg-type]
        for stream in streams:
            closing.forget(stream)  # type: ignore[arg-type]
    await asyncio.sleep(0.1)
    assert trims.calls == 0


async def test_a_second_crowd_is_trimmed_after_too() -> None:
    trims = Trims()
    closing = StreamsClosing(CrowdDepartures(crowd=10, settle_seconds=0.01, trim=trims))
    for round_ in (1, 2):
        trims.done.clear()
        streams = callbacks(12)
        for stream in streams:
            closing.watch(stream)  # type: ignore[arg-type]
        for stream in streams:
            closing.forget(stream)  # type: ignore[arg-type]
        await asyncio.wait_for(trims.done.wait(), 5)
        assert trims.calls == round_


async def test_shutdown_drops_a_trim_not_yet_run() -> None:
    trims = Trims()
    closing = StreamsClosing(CrowdDepartures(crowd=10, settle_seconds=0.05, trim=trims))
    streams = callbacks(12)
    for stream in streams:
        closing.watch(stream)  # type: ignore[arg-type]
    for stream in streams:
        closing.forget(stream)  # type: ignore[arg-type]
    closing.close()
    await asyncio.sleep(0.2)
    assert trims.calls == 0


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="malloc_trim is glibc's")
def test_the_heap_trim_reaches_the_c_library() -> None:
    assert trim_heap() is True
