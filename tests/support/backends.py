"""A real server per storage backend, started and stopped (and its database dropped) for tests."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.support.databases import create_database, drop_database, postgres_available
from tests.support.server import TEST_CONFIG, ServerProcess


@contextmanager
def backend_server(
    backend: str, workdir: Path, config: Path = TEST_CONFIG, env: dict[str, str] | None = None
) -> Iterator[ServerProcess]:
    """A started server: `runyard dev` for "sqlite", `runyard serve` on a fresh PostgreSQL
    database (no Redis) for "postgres"; stopped, and its database dropped, on exit."""
    if backend == "sqlite":
        proc = ServerProcess("dev", workdir, config=config, env=dict(env or {})).start()
        try:
            yield proc
        finally:
            proc.stop()
        return
    if not postgres_available():
        pytest.fail("PostgreSQL is not reachable at 127.0.0.1:5432; start it (see README)")
    url = create_database()
    proc = ServerProcess(
        "serve", workdir, config=config, env={**(env or {}), "DATABASE_URL": url, "REDIS_URL": ""}
    )
    try:
        proc.start()
        yield proc
    finally:
        proc.stop()
        drop_database(url)
