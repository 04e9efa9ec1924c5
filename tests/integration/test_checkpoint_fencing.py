"""A run's checkpoint writes are fenced in their own statements, on PostgreSQL and SQLite."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypedDict

import pytest
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from sqlalchemy.ext.asyncio import AsyncEngine

from runyard.checkpoints.checkpointer import fenced, open_checkpointer
from runyard.db import run_attempts as attempts_db
from runyard.db import run_claims as claims_db
from runyard.db import runs as runs_db
from runyard.db import threads as threads_db
from runyard.domain.errors import StaleAttemptError
from tests.support.databases import migrated_engine, open_statement_pool
from tests.support.rows import run_row, thread_row

pytestmark = pytest.mark.timeout(60)


class State(TypedDict, total=False):
    n: int


def _graph() -> Any:
    builder = StateGraph(State)
    builder.add_node("bump", lambda state: {"n": state.get("n", 0) + 1})
    builder.add_edge(START, "bump")
    builder.add_edge("bump", END)
    return builder.compile()


@asynccontextmanager
async def _storage(kind: str, data_dir: Path) -> AsyncIterator[tuple[AsyncEngine, Any]]:
    """A migrated database and the checkpointer a server would open on it."""
    async with migrated_engine(kind, data_dir) as engine:
        url = engine.url.render_as_string(hide_password=False)
        async with open_statement_pool(engine) as pool:
            async with open_checkpointer(url, data_dir, None, 2, pool) as saver:
                yield engine, saver


async def _claim(engine: AsyncEngine, run_id: str, owner: str) -> int:
    async with engine.begin() as session:
        claimed = await claims_db.claim_run(session, run_id, owner, 30)
    assert claimed is not None
    return claimed.run.attempt


async def _new_run(engine: AsyncEngine) -> tuple[str, str]:
    thread_id, run_id = str(uuid.uuid4()), str(uuid.uuid4())
    async with engine.begin() as session:
        await threads_db.insert_thread(session, thread_row(thread_id))
        await runs_db.insert_run(session, run_row(run_id, thread_id))
    return thread_id, run_id


async def _checkpoints(saver: BaseCheckpointSaver, thread_id: str) -> int:
    return len([item async for item in saver.alist({"configurable": {"thread_id": thread_id}})])


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
async def test_an_attempt_whose_run_moved_on_writes_no_checkpoint(
    kind: str, tmp_path: Path
) -> None:
    """Attempt 1 lost the run a moment after it held it (within any cache of the check):
    its checkpoint and its pending writes are refused, attempt 2's are written."""
    async with _storage(kind, tmp_path) as (engine, saver):
        thread_id, run_id = await _new_run(engine)
        first = await _claim(engine, run_id, "instance-a")
        config = {"configurable": {"thread_id": thread_id}}
        old = _graph().copy(update={"checkpointer": fenced(saver, run_id, first)})
        # Held: written.
        assert await old.ainvoke({"n": 1}, config) == {"n": 2}
        written = await _checkpoints(saver, thread_id)
        assert written > 0

        # The lease moved on: handed back and claimed by another instance (attempt 2).
        async with engine.begin() as session:
            assert await attempts_db.release_run(session, run_id, first)
        second = await _claim(engine, run_id, "instance-b")
        assert second == first + 1

        with pytest.raises(StaleAttemptError, match=f"attempt {first} of run {run_id}"):
            await old.ainvoke({"n": 10}, config)
        assert await _checkpoints(saver, thread_id) == written
        latest = await saver.aget_tuple(config)
        assert latest is not None
        with pytest.raises(StaleAttemptError):
            await fenced(saver, run_id, first).aput_writes(latest.config, [("n", 99)], "task-x")
        after = await saver.aget_tuple(config)
        assert after is not None and after.pending_writes == latest.pending_writes

        # The attempt that holds the run writes.
        new = _graph().copy(update={"checkpointer": fenced(saver, run_id, second)})
        assert await new.ainvoke({"n": 5}, config) == {"n": 6}
        assert await _checkpoints(saver, thread_id) > written


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
async def test_no_write_once_the_run_ended_or_was_deleted(kind: str, tmp_path: Path) -> None:
    """An attempt whose run was finished (or deleted) writes nothing more."""
    async with _storage(kind, tmp_path) as (engine, saver):
        thread_id, run_id = await _new_run(engine)
        attempt = await _claim(engine, run_id, "instance-a")
        view = fenced(saver, run_id, attempt, empty=True)
        config = {"configurable": {"thread_id": thread_id}}
        async with engine.begin() as session:
            await runs_db.delete_run(session, run_id)
        with pytest.raises(StaleAttemptError):
            await _graph().copy(update={"checkpointer": view}).ainvoke({"n": 1}, config)
        assert await _checkpoints(saver, thread_id) == 0


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
async def test_repeated_writes_of_the_holding_attempt_are_not_refused(
    kind: str, tmp_path: Path
) -> None:
    """Writes kept as first written (a task's ordinary writes, stored again) still count as
    held: the attempt is not stood down for writing the same row twice."""
    async with _storage(kind, tmp_path) as (engine, saver):
        thread_id, run_id = await _new_run(engine)
        attempt = await _claim(engine, run_id, "instance-a")
        view = fenced(saver, run_id, attempt)
        config = {"configurable": {"thread_id": thread_id}}
        await _graph().copy(update={"checkpointer": view}).ainvoke({"n": 1}, config)
        latest = await saver.aget_tuple(config)
        assert latest is not None
        writes = [("n", 1), ("n", 2)]
        await view.aput_writes(latest.config, writes, "task-y")
        await view.aput_writes(latest.config, writes, "task-y")
        again = await saver.aget_tuple(config)
        assert again is not None
        assert [w for w in again.pending_writes or [] if w[0] == "task-y"] == [
            ("task-y", "n", 1),
            ("task-y", "n", 2),
        ]
