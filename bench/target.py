"""A throwaway Runyard server for `--start dev|serve`, stopped (and its database dropped) after."""

from __future__ import annotations

import logging
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.support.databases import create_database, drop_database, postgres_available
from tests.support.server import ServerProcess

log = logging.getLogger("bench")

BENCH_CONFIG = Path(__file__).resolve().parent / "graphs" / "langgraph.json"


@contextmanager
def started_server(mode: str) -> Iterator[str]:
    """Start `runyard dev` (SQLite) or `runyard serve` (fresh PostgreSQL db) and yield its URL."""
    workdir = Path(tempfile.mkdtemp(prefix=f"runyard-bench-{mode}-"))
    database: str | None = None
    env: dict[str, str] = {}
    if mode == "serve":
        if not postgres_available():
            raise SystemExit("bench: PostgreSQL is not reachable (RUNYARD_TEST_POSTGRES)")
        database = create_database("runyard_bench")
        # No Redis: `serve` runs in-process on PostgreSQL, as the test fixture does.
        env = {"DATABASE_URL": database, "REDIS_URL": ""}
    server = ServerProcess(mode, workdir, env=env, config=BENCH_CONFIG)
    clean = False
    try:
        server.start()
        log.info("bench_server_started mode=%s url=%s log=%s", mode, server.url, server.log_path)
        yield server.url
        clean = True
    finally:
        server.stop()
        if database is not None:
            drop_database(database)
        if clean:
            shutil.rmtree(workdir, ignore_errors=True)
        else:
            log.warning("bench_server_log_kept path=%s", server.log_path)
