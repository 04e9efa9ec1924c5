"""A thread streaming session that has read its thread's stored runs holds none of their
rows while it waits for the next run: hundreds of idle sessions on a thread of many runs
would otherwise each keep a page of rows (a few kilobytes a row) for as long as they wait."""

from __future__ import annotations

import asyncio
import gc
import uuid
import weakref
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from runyard.db import runs as runs_db
from runyard.db import threads as threads_db
from runyard.wiring.runtime import Runtime
from tests.support.backends import backend_runtime
from tests.support.rows import run_row, thread_row

pytestmark = pytest.mark.timeout(60)


class Page(list[Any]):
    """A page of rows that can be watched with a weak reference."""


@pytest.fixture
async def runtime(tmp_path: Path) -> AsyncIterator[Runtime]:
    async with backend_runtime("sqlite", tmp_path) as rt:
        yield rt


async def test_a_waiting_session_holds_no_page_of_its_threads_runs(
    runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    thread_id = str(uuid.uuid4())
    async with runtime.sessions() as session, session.begin():
        await threads_db.insert_thread(session, thread_row(thread_id))
        # More than a page of ended runs that no session started: read, none replayed.
        for _ in range(70):
            row = {**run_row(str(uuid.uuid4()), thread_id), "status": "success"}
            await runs_db.insert_run(session, row)
    pages: list[weakref.ref[Page]] = []
    read = runs_db.runs_created_after
    both_read = asyncio.Event()

    async def watched(session: Any, thread: str, after: Any, limit: int) -> list[Any]:
        page = Page(await read(session, thread, after, limit))
        pages.append(weakref.ref(page))
        if len(pages) >= 2:
            both_read.set()
        return page

    monkeypatch.setattr(runs_db, "runs_created_after", watched)
    events = runtime.services.session.thread_events(thread_id, None)
    reader = asyncio.create_task(anext(events))
    # Both pages read (50 rows, then 20), then the session waits for the thread's next run.
    await asyncio.wait_for(both_read.wait(), 30)
    await asyncio.sleep(0.2)
    assert not reader.done()
    gc.collect()
    held = [len(page) for page in (ref() for ref in pages) if page is not None]
    assert held == []
    reader.cancel()
    await asyncio.gather(reader, return_exceptions=True)
    await events.aclose()
