"""The embedded store (`runyard dev`) keeps a few SQLite connections and opens no more for a
burst: each one is a thread of its own, whose memory would stay in the process after it
closed (hundreds of stream clients joining a thread at once opened ten more)."""

from __future__ import annotations

import asyncio
import gc
import sys
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event, text

from runyard.db.engine import SQLITE_CONNECTIONS, create_engine, session_factory

pytestmark = pytest.mark.timeout(60)
BURST = 40
# Sessions cancelled one after another, each a little later in its life than the last.
CANCEL_ROUNDS = 300


async def test_a_burst_of_requests_opens_no_connection_beyond_the_pool(tmp_path: Path) -> None:
    engine = create_engine(f"sqlite+aiosqlite:///{tmp_path / 'runyard.db'}")
    opened: list[Any] = []
    event.listen(engine.sync_engine, "connect", lambda conn, _: opened.append(conn))

    async def request() -> int:
        async with engine.connect() as conn:
            value = (await conn.execute(text("SELECT 1"))).scalar_one()
            await asyncio.sleep(0.05)  # a request's statements take a moment
            return int(value)

    try:
        answers = await asyncio.gather(*(request() for _ in range(BURST)))
    finally:
        await engine.dispose()
    assert answers == [1] * BURST
    assert 1 <= len(opened) <= SQLITE_CONNECTIONS


async def test_a_session_cancelled_as_it_checks_out_gives_its_connection_back(
    tmp_path: Path,
) -> None:
    """A stream whose client leaves, or a poller stopped, is cancelled wherever it is, its
    connection's checkout included: the connection must go back to the pool, not be left to
    the garbage collector (which SQLAlchemy warns of, an error in this suite)."""
    engine = create_engine(f"sqlite+aiosqlite:///{tmp_path / 'runyard.db'}")
    sessions = session_factory(engine, autocommit=True)
    left: list[str] = []

    def unraisable(seen: Any) -> None:
        left.append(str(seen.exc_value))

    async def reader() -> None:
        while True:
            async with sessions() as session:
                await session.execute(text("SELECT 1"))
            await asyncio.sleep(0)

    previous, sys.unraisablehook = sys.unraisablehook, unraisable
    try:
        # Cancelled at every moment of a session's life: some land in the checkout.
        for round_ in range(CANCEL_ROUNDS):
            task = asyncio.create_task(reader())
            await asyncio.sleep((round_ % 30) / 10_000)
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        gc.collect()
        async with sessions() as session:
            assert (await session.execute(text("SELECT 1"))).scalar_one() == 1
    finally:
        await engine.dispose()
        gc.collect()
        sys.unraisablehook = previous
    assert left == []
