"""Start-up unwinds and shutdown is ordered.

A runtime whose third phase (the workers, after storage and transport) fails leaves nothing
running: no task, no thread, no database connection, no Redis connection or listener. A
clean stop closes Redis only after the loops that read it (the stream reader and the
notification listener) have stopped, so none of them reports Redis gone. `stop()` is safe
twice and before `start()`. On `runyard dev` (SQLite, in-process) and on PostgreSQL with
Redis.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
import redis

from runyard.settings import Settings
from runyard.wiring.runtime import Runtime
from runyard.worker.pool import WorkerPool
from tests.support.databases import ADMIN_URL
from tests.support.redis_keys import REDIS_URL, postgres_and_redis
from tests.support.server import TEST_CONFIG

pytestmark = pytest.mark.timeout(60)


class InjectedFailure(Exception):
    """The failure the test makes the workers phase raise."""


@dataclass
class Backend:
    """Where a runtime keeps its state: settings, and what to look at once it is gone."""

    env: dict[str, Any]
    database_url: str | None = None
    redis_prefix: str | None = None

    def settings(self, tmp_path: Path) -> Settings:
        return Settings(
            RUNYARD_CONFIG=TEST_CONFIG,
            RUNYARD_DATA_DIR=tmp_path / "data",
            WORKER_DRAIN_TIMEOUT=1,
            **self.env,
        )


@pytest.fixture(params=["sqlite", "postgres+redis"])
def backend(request: pytest.FixtureRequest) -> Iterator[Backend]:
    if request.param == "sqlite":
        yield Backend({})
        return
    with postgres_and_redis("runyard_unwind") as env:
        yield Backend(env, env["DATABASE_URL"], env["RUNYARD_REDIS_PREFIX"])


def _database_connections(url: str) -> int:
    name = url.rsplit("/", 1)[1]
    with psycopg.connect(ADMIN_URL, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = %s", (name,)
        ).fetchone()
    return int(row[0]) if row else 0


def _redis_leftovers(prefix: str) -> list[str]:
    """This runtime's named Redis connections and its channels' subscribers."""
    with redis.Redis.from_url(REDIS_URL, decode_responses=True) as client:
        clients = [c["name"] for c in client.client_list() if c["name"].startswith(prefix)]
        channels = [f"{prefix}cancel", f"{prefix}events", f"{prefix}done"]
        subscribed = [f"{name}:{n}" for name, n in client.pubsub_numsub(*channels) if n]
    return clients + subscribed


async def _settled(probe: Any, *args: Any) -> Any:
    """The probe's answer once it is empty, or its last answer after a few seconds.

    A closed connection leaves the server's lists a moment after the client let go.
    """
    answer = probe(*args)
    for _ in range(50):
        if not answer:
            return answer
        await asyncio.sleep(0.1)
        answer = probe(*args)
    return answer


def _store_batcher(task: asyncio.Task[Any]) -> bool:
    """LangGraph's batched store keeps a task, holding only a weak reference to the store,
    until the store is collected: the library's, not a part Runyard starts or stops."""
    code = getattr(task.get_coro(), "cr_code", None)
    return code is not None and code.co_filename.endswith("langgraph/store/base/batch.py")


async def _leftovers(
    backend: Backend, tasks: set[asyncio.Task[Any]], threads: set[threading.Thread]
) -> dict[str, Any]:
    current = asyncio.current_task()

    def new_tasks() -> list[str]:
        new = asyncio.all_tasks() - tasks - {current}
        return sorted(f"{t.get_name()} {t.get_coro()}" for t in new if not _store_batcher(t))

    def new_threads() -> list[str]:
        # The event loop's own executor (`asyncio.to_thread`) outlives any runtime.
        alive = set(threading.enumerate()) - threads
        return sorted(t.name for t in alive if not t.name.startswith("asyncio_"))

    left: dict[str, Any] = {
        "tasks": await _settled(new_tasks),
        "threads": await _settled(new_threads),
    }
    if backend.database_url is not None:
        left["database_connections"] = await _settled(_database_connections, backend.database_url)
    if backend.redis_prefix is not None:
        left["redis"] = await _settled(_redis_leftovers, backend.redis_prefix)
    return left


async def test_a_failed_phase_unwinds_what_started_before_it(
    backend: Backend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tasks, threads = asyncio.all_tasks(), set(threading.enumerate())
    started = WorkerPool.start

    def start_then_fail(self: WorkerPool) -> None:
        started(self)
        raise InjectedFailure("the workers phase failed")

    # The third phase's last step fails once its own loops run: storage and transport
    # (connections, listeners, loops) and the worker loops must all be unwound.
    monkeypatch.setattr(WorkerPool, "start", start_then_fail)
    rt = Runtime(backend.settings(tmp_path))
    try:
        with pytest.raises(InjectedFailure):
            await rt.start()
        left = await _leftovers(backend, tasks, threads)
        assert not any(left.values()), f"left running after a failed start: {left}"
    finally:
        await rt.stop()


async def test_stop_is_safe_before_start_and_twice(backend: Backend, tmp_path: Path) -> None:
    tasks, threads = asyncio.all_tasks(), set(threading.enumerate())
    await Runtime(backend.settings(tmp_path)).stop()
    rt = Runtime(backend.settings(tmp_path))
    await rt.start()
    await rt.stop()
    await rt.stop()
    left = await _leftovers(backend, tasks, threads)
    assert not any(left.values()), f"left running after stop: {left}"


async def test_redis_closes_after_the_loops_that_read_it(
    backend: Backend, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    rt = Runtime(backend.settings(tmp_path))
    await rt.start()
    try:
        # Both listeners are subscribed: closing Redis under them now would be seen.
        assert rt.dead_parts() == []
    finally:
        with caplog.at_level(logging.INFO, logger="runyard"):
            caplog.clear()
            await rt.stop()
    complaints = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert complaints == [], "a part saw its connection close under it at shutdown"
