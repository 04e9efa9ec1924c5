"""The in-process fan-out: one source read for every member, each member's buffer bounded,
a member that falls behind detached (it goes on alone) and never holding the others back."""

from __future__ import annotations

import asyncio

import pytest

from runyard.streaming.fanout import BUSY, Fanout, Fanouts

pytestmark = pytest.mark.timeout(10)


async def test_members_share_one_source_and_a_slow_member_holds_nobody_back() -> None:
    fanouts: Fanouts[int] = Fanouts(limit=4)
    started = 0
    gate = asyncio.Event()

    async def source(fanout: Fanout[int]) -> None:
        nonlocal started
        started += 1
        await gate.wait()
        for item in range(10):
            fanout.publish([item])
            await asyncio.sleep(0)  # the reading member takes it
        await asyncio.Event().wait()  # a live source: it goes on until its members leave

    fast, slow = fanouts.join("t", "p", source), fanouts.join("t", "p", source)
    assert fast is not None and slow is not None
    async with fast as reader, slow as idle:
        got: list[int] = []
        gate.set()
        while len(got) < 10:
            items = await reader.take()
            assert items is not None
            got += items
        # The reader had everything; the idle member overflowed and was let go, its buffer
        # dropped.
        assert got == list(range(10))
        assert await idle.take() is None and idle.detached
    assert started == 1
    assert fanouts.active() == 0  # the last member gone, its source is stopped


async def test_a_source_elsewhere_is_not_joined_and_an_ended_source_releases_its_members() -> None:
    fanouts: Fanouts[str] = Fanouts()
    done = asyncio.Event()

    async def source(fanout: Fanout[str]) -> None:
        fanout.position = BUSY
        fanout.publish(["last"])
        await done.wait()

    joined = fanouts.join("t", "start", source)
    assert joined is not None
    async with joined as member:
        await asyncio.sleep(0)  # the source runs: it is now delivering
        assert fanouts.join("t", "start", source) is None
        done.set()
        assert await member.take() == ["last"]  # what was buffered comes first
        assert await member.take() is None and member.ended
    assert fanouts.active() == 0
