"""A real server per storage backend, started and stopped (and its database dropped) for tests."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import pytest

from runyard.settings import Settings
from runyard.wiring.runtime import Runtime
from tests.support.databases import (
    create_migrated_database,
    drop_database,
    postgres_available,
)
from tests.support.server import TEST_CONFIG, ServerProcess


@contextmanager
def backend_server(
    backend: str, workdir: Path, config: Path = TEST_CONFIG, env: dict[str, str] | None = None
) -> Iterator[ServerProcess]:
    """A started server: `runyard dev` for "sqlite", `runyard serve` on a fresh PostgreSQL
    database (no Redis) for "postgres"; stopped, and its database dropped, on exit.

    The PostgreSQL database is a copy of the migrated template: the migrations' own tests
    (tests/integration/test_migrations.py, test_cli.py) start servers on empty ones."""
    if backend == "sqlite":
        proc = ServerProcess("dev", workdir, config=config, env=dict(env or {})).start()
        try:
            yield proc
        finally:
            proc.stop()
        return
    if not postgres_available():
        pytest.fail("PostgreSQL is not reachable at 127.0.0.1:5432; start it (docs/testing.md)")
    url = create_migrated_database()
    proc = ServerProcess(
        "serve", workdir, config=config, env={**(env or {}), "DATABASE_URL": url, "REDIS_URL": ""}
    )
    try:
        proc.start()
        yield proc
    finally:
        proc.stop()
        drop_database(url)


@asynccontextmanager
async def backend_runtime(
    backend: str, workdir: Path, config: Path = TEST_CONFIG, **env: Any
) -> AsyncIterator[Runtime]:
    """A started in-process instance: the embedded SQLite store for "sqlite", a fresh
    PostgreSQL database (no Redis) for "postgres"; stopped, and its database dropped, on
    exit (the database a copy of the migrated template). `env`: more settings, by their
    variable names."""
    settings: dict[str, Any] = {
        "RUNYARD_CONFIG": config,
        "RUNYARD_DATA_DIR": workdir / "data",
        "WORKER_DRAIN_TIMEOUT": 1,
        **env,
    }
    if backend == "sqlite":
        rt = Runtime(Settings(**settings))
        await rt.start()
        try:
            yield rt
        finally:
            await rt.stop()
        return
    if not postgres_available():
        pytest.fail("PostgreSQL is not reachable at 127.0.0.1:5432; start it (docs/testing.md)")
    url = create_migrated_database("runyard_runtime")
    try:
        rt = Runtime(Settings(**settings, DATABASE_URL=url))
        await rt.start()
        try:
            yield rt
        finally:
            await rt.stop()
    finally:
        drop_database(url)
