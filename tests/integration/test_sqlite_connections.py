"""The embedded store (`runyard dev`) keeps a few SQLite connections and opens no more for a
burst: each one is a thread of its own, whose memory would stay in the process after it
closed (hundreds of stream clients joining a thread at once opened ten more)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event, text

from runyard.db.engine import SQLITE_CONNECTIONS, create_engine

pytestmark = pytest.mark.timeout(60)
BURST = 40


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
