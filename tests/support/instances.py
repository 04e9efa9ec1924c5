"""In-process instances of a deployment, and a hook that holds a run open at its final write.

`runyard dev` is one runtime on SQLite with the in-memory broker; on PostgreSQL with Redis
there are two: one executes the runs (`worker`), the other (`api`, no worker loops) takes
the requests, so what a client sees comes from another instance than the executor's.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from runyard.domain.status import RunStatus
from runyard.runtime import Runtime
from runyard.settings import Settings
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
async def started_instances(kind: str, tmp_path: Path, name: str) -> AsyncIterator[Instances]:
    """`sqlite`: one `runyard dev` runtime; `postgres`: two instances on one fresh
    PostgreSQL database (named after `name`) and a Redis key prefix of their own."""
    if kind == "sqlite":
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


class HeldFinish:
    """Holds the worker's first `success` write of a run until `release`: the run's graph
    has finished and the run still reads as running."""

    def __init__(self, rt: Runtime, monkeypatch: pytest.MonkeyPatch) -> None:
        self.reached = asyncio.Event()
        self._go = asyncio.Event()
        finish = rt.lifecycle.finish

        async def held(run: Any, attempt: int, status: RunStatus, *args: Any, **kwargs: Any) -> Any:
            if status is RunStatus.SUCCESS and not self.reached.is_set():
                self.reached.set()
                await self._go.wait()
            return await finish(run, attempt, status, *args, **kwargs)

        monkeypatch.setattr(rt.lifecycle, "finish", held)

    def release(self) -> None:
        """Let the held write go on."""
        self._go.set()
