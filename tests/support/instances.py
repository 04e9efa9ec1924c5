"""In-process deployments for interleaving tests: where runs execute and where requests land,
and a hook that holds one step of a runtime open until the test lets it go."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from runyard.db import runs as runs_db
from runyard.db import threads as threads_db
from runyard.domain.run import RunRecord
from runyard.domain.status import RunStatus
from runyard.domain.thread import ThreadRecord
from runyard.settings import Settings
from runyard.wiring.runtime import Runtime
from tests.support.redis_keys import postgres_and_redis
from tests.support.server import TEST_CONFIG


@dataclass
class Instances:
    """Where runs execute (`worker`) and where clients' requests land (`api`)."""

    worker: Runtime
    api: Runtime


def _settings(tmp_path: Path, **env: Any) -> Settings:
    return Settings(
        RUNYARD_CONFIG=TEST_CONFIG,
        RUNYARD_DATA_DIR=tmp_path / "data",
        WORKER_DRAIN_TIMEOUT=1,
        **env,
    )


@asynccontextmanager
async def deployment(backend: str, tmp_path: Path, name: str) -> AsyncIterator[Instances]:
    """`runyard dev` (one runtime: "sqlite"), or two instances on one PostgreSQL database
    and Redis ("postgres"): one executes runs, the other (no workers) takes the requests."""
    if backend == "sqlite":
        rt = Runtime(_settings(tmp_path))
        await rt.start()
        try:
            yield Instances(rt, rt)
        finally:
            await rt.stop()
        return
    with postgres_and_redis(name) as shared:
        worker = Runtime(_settings(tmp_path, **shared))
        api = Runtime(_settings(tmp_path, **shared, WORKER_COUNT=0))
        try:
            await worker.start()
            await api.start()
            yield Instances(worker, api)
        finally:
            await api.stop()
            await worker.stop()


class Held:
    """Holds the first call of `owner.name(...)` that `when(*args, **kwargs)` picks, before
    it runs, until `release`; every other call goes through."""

    def __init__(
        self,
        monkeypatch: pytest.MonkeyPatch,
        owner: object,
        name: str,
        when: Callable[..., bool],
    ) -> None:
        self.reached = asyncio.Event()
        self._go = asyncio.Event()
        call = getattr(owner, name)

        async def held(*args: Any, **kwargs: Any) -> Any:
            if not self.reached.is_set() and when(*args, **kwargs):
                self.reached.set()
                await self._go.wait()
            return await call(*args, **kwargs)

        monkeypatch.setattr(owner, name, held)

    async def wait(self, timeout: float = 20) -> None:
        """Until the held call arrived."""
        await asyncio.wait_for(self.reached.wait(), timeout)

    def release(self) -> None:
        """Let the held call go on."""
        self._go.set()


def held_end(monkeypatch: pytest.MonkeyPatch, rt: Runtime, status: RunStatus) -> Held:
    """Holds `rt`'s first final write of a run ending with `status` (`lifecycle.finish`)."""
    return Held(
        monkeypatch,
        rt.lifecycle,
        "finish",
        lambda _run, _attempt, ending, *_args, **_kwargs: ending is status,
    )


async def stored_run(rt: Runtime, run_id: str) -> RunRecord | None:
    """The run's row as stored now, or None."""
    async with rt.autocommit() as session:
        return await runs_db.get_run(session, run_id)


async def stored_thread(rt: Runtime, thread_id: str) -> ThreadRecord | None:
    """The thread's row as stored now, or None."""
    async with rt.autocommit() as session:
        return await threads_db.get_thread(session, thread_id)
