"""While PostgreSQL is down, every request that needs it is told to come back (503 with
Retry-After), never an internal server error; a run whose end is written during the outage
ends in the same attempt once the database is back. On a private PostgreSQL the test stops."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from tests.support.server import ServerProcess
from tests.support.throwaway import ThrowawayPostgres, postgres_tools

pytestmark = pytest.mark.postgres

OUTAGE_MESSAGE = "the database is unavailable or busy; retry shortly"


@pytest.fixture
async def database() -> AsyncIterator[ThrowawayPostgres]:
    tools = postgres_tools()
    if tools is None:
        pytest.skip("initdb/pg_ctl not installed: the PostgreSQL outage is not covered here")
    instance = await asyncio.to_thread(ThrowawayPostgres(tools).init)
    try:
        yield instance
    finally:
        await asyncio.to_thread(instance.destroy)


@pytest.fixture
async def server(database: ThrowawayPostgres, tmp_path: Path) -> AsyncIterator[ServerProcess]:
    env = {"DATABASE_URL": database.url, "REDIS_URL": ""}
    proc = ServerProcess("serve", tmp_path / "server", env=env)
    await asyncio.to_thread(proc.start)
    try:
        yield proc
    finally:
        await asyncio.to_thread(proc.stop)


@pytest.mark.timeout(90)
async def test_requests_during_an_outage_are_told_to_retry(
    server: ServerProcess, database: ThrowawayPostgres
) -> None:
    async with httpx.AsyncClient(base_url=server.url, timeout=60) as http:
        thread_id = (await http.post("/threads", json={})).json()["thread_id"]
        await asyncio.to_thread(database.stop)
        # Each request again: the first finds a pooled connection broken, the later ones
        # find no connection to be had at all.
        for _ in range(3):
            answers = [
                await http.get(f"/threads/{thread_id}"),
                await http.post("/threads", json={}),
                await http.post("/threads/search", json={}),
                await http.post("/assistants/search", json={}),
                await http.post(
                    f"/threads/{thread_id}/runs",
                    json={"assistant_id": "agent", "input": {"messages": []}},
                ),
                await http.patch(f"/threads/{thread_id}", json={"metadata": {"a": 1}}),
            ]
            for answer in answers:
                where = f"{answer.request.method} {answer.request.url.path}"
                assert answer.status_code == 503, f"{where}: {answer.status_code} {answer.text}"
                assert answer.json() == {"detail": OUTAGE_MESSAGE}, where
                assert answer.headers["retry-after"] == "1", where
        await asyncio.to_thread(database.start)
        for _ in range(100):
            answer = await http.post("/threads", json={})
            if answer.status_code == 200:
                break
            assert answer.status_code == 503, answer.text
            await asyncio.sleep(0.1)
        assert answer.status_code == 200, answer.text
        assert (await http.get(f"/threads/{thread_id}")).status_code == 200
    assert "request_failed" not in server.log_path.read_text(errors="replace")
