"""Throwaway Runyard servers for `--start dev|serve|redis`, stopped (and cleaned up) after."""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import redis

from runyard.settings import Settings
from tests.support.databases import create_database, drop_database, postgres_available
from tests.support.server import ROOT, ServerProcess
from tests.support.throwaway import ThrowawayPostgres, postgres_tools

log = logging.getLogger("bench")

BENCH_CONFIG = Path(__file__).resolve().parent / "graphs" / "langgraph.json"
# A shared host under load can take a minute to start an instance.
START_TIMEOUT_S = 120.0

# Settings the bench sets itself to wire a deployment together; they say nothing about tuning.
PLUMBING = frozenset(
    {
        "DATABASE_URL",
        "REDIS_URL",
        "RUNYARD_REDIS_PREFIX",
        "RUNYARD_DATA_DIR",
        "RUNYARD_CONFIG",
        "RUNYARD_MIGRATE_ON_START",
    }
)

# Runs in a child with the servers' environment and working directory, so `.env` and exported
# variables count exactly as they do for the servers.
_SETTINGS_PROBE = """
import json
from runyard.settings import Settings

settings = Settings()
changed = {}
for name, info in Settings.model_fields.items():
    value = getattr(settings, name)
    if value != info.get_default(call_default_factory=True):
        changed[info.alias or name] = value
print(json.dumps(changed, default=str))
"""


def _python(
    args: list[str], env: dict[str, str], timeout: float
) -> subprocess.CompletedProcess[str]:
    """Run `python ARGS` as the servers run: from the repository root, in their environment."""
    return subprocess.run(
        [sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
    )


@dataclass
class Deployment:
    """The server processes of one bench run, all sharing one database (and Redis prefix)."""

    mode: str
    workdir: Path
    env: dict[str, str]
    servers: list[ServerProcess] = field(default_factory=list)
    effective: dict[str, Any] = field(default_factory=dict)
    # The deployment's own PostgreSQL server (chaos restarts it), or None: the shared one.
    postgres: ThrowawayPostgres | None = None

    @property
    def urls(self) -> list[str]:
        """Base URL of every instance, in start order."""
        return [server.url for server in self.servers]

    def start(self, count: int) -> None:
        """Migrate once, as a deployment's one-shot migration job does, then start `count`
        instances in parallel (they find the schema current and start without Alembic)."""
        if self.mode != "dev":
            self._migrate()
        self.servers.extend(self._server(i) for i in range(count))
        with ThreadPoolExecutor(max_workers=count) as pool:
            list(pool.map(lambda server: server.start(START_TIMEOUT_S), self.servers))

    def _migrate(self) -> None:
        done = _python(["-m", "runyard.cli", "migrate"], {**os.environ, **self.env}, timeout=120)
        if done.returncode != 0:
            raise RuntimeError(f"runyard migrate failed:\n{done.stdout}{done.stderr}")

    def _server(self, index: int, port: int | None = None) -> ServerProcess:
        env = {**self.env, "RUNYARD_DATA_DIR": str(self.workdir / f"data-{index}")}
        command = "dev" if self.mode == "dev" else "serve"
        server = ServerProcess(command, self.workdir, env=env, config=BENCH_CONFIG)
        if port is not None:
            server.port = port
        return server

    def index_of(self, pid: int) -> int | None:
        """Which instance has this process id, if any."""
        for index, server in enumerate(self.servers):
            if server.process is not None and server.process.pid == pid:
                return index
        return None

    def kill(self, index: int) -> None:
        """SIGKILL one instance and reap it."""
        process = self.servers[index].process
        if process is not None and process.poll() is None:
            process.kill()
            process.wait(timeout=10)
        log.info("bench_instance_killed index=%s url=%s", index, self.servers[index].url)

    def restart(self, index: int) -> None:
        """Start a fresh process in place of a dead instance, on the same port."""
        old = self.servers[index]
        self.servers[index] = self._server(index, port=old.port).start(START_TIMEOUT_S)
        log.info("bench_instance_restarted index=%s url=%s", index, old.url)

    def terminate(self, index: int) -> None:
        """SIGTERM one instance and wait until it exits (it drains first)."""
        process = self.servers[index].process
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=120)
        log.info("bench_instance_terminated index=%s url=%s", index, self.servers[index].url)

    def restart_database(self, outage_s: float) -> None:
        """Stop the deployment's own PostgreSQL at once (no checkpoint), start it after
        `outage_s`."""
        if self.postgres is None:
            raise RuntimeError("this deployment runs on the shared PostgreSQL: not restarting it")
        self.postgres.stop()
        time.sleep(outage_s)
        self.postgres.start()
        log.info("bench_database_restarted outage_s=%s", outage_s)

    def database_connections(self) -> int:
        """Connections to the deployment's database now (this count's own excluded)."""
        url = self.env["DATABASE_URL"].replace("postgresql+asyncpg://", "postgresql://")
        with psycopg.connect(url, autocommit=True) as conn:
            row = conn.execute(
                "SELECT count(*) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            ).fetchone()
        return int(row[0]) if row else 0

    def lease_seconds(self) -> float:
        """LEASE_DURATION_SECONDS as the instances run it (its default unless set)."""
        if "LEASE_DURATION_SECONDS" in self.effective:
            return float(self.effective["LEASE_DURATION_SECONDS"])
        return float(Settings.model_fields["lease_duration_seconds"].default)

    def stop(self) -> None:
        """SIGTERM every instance at once (they drain in parallel), SIGKILL stragglers."""
        with ThreadPoolExecutor(max_workers=max(len(self.servers), 1)) as pool:
            list(pool.map(lambda server: server.stop(), self.servers))

    def settings(self) -> dict[str, Any]:
        """Runyard settings that differ from their defaults, as the servers see them."""
        env = {**os.environ, **self.env, "RUNYARD_DATA_DIR": str(self.workdir / "data-0")}
        if self.mode == "dev":
            # `runyard dev` clears these itself, whatever the environment says.
            env.update({"DATABASE_URL": "", "REDIS_URL": ""})
        probe = _python(["-c", _SETTINGS_PROBE], env, timeout=60)
        if probe.returncode != 0:
            raise SystemExit(f"bench: invalid Runyard settings:\n{probe.stderr[-2000:]}")
        changed: dict[str, Any] = json.loads(probe.stdout)
        return {key: value for key, value in changed.items() if key not in PLUMBING}


@contextmanager
def started_deployment(
    mode: str,
    instances: int,
    overrides: dict[str, str],
    redis_url: str,
    keep_logs: bool,
    private_postgres: bool = False,
) -> Iterator[Deployment]:
    """Start `runyard dev`, `serve` (PostgreSQL) or `instances` x `serve` (PostgreSQL + Redis).

    `private_postgres`: on a PostgreSQL server of their own (initdb on a free port), which
    the chaos scenario may restart; otherwise on a database of the shared server.
    """
    workdir = Path(tempfile.mkdtemp(prefix=f"runyard-bench-{mode}-"))
    database: str | None = None
    prefix: str | None = None
    env: dict[str, str] = {}
    postgres: ThrowawayPostgres | None = None
    if mode in ("serve", "redis") and private_postgres:
        tools = postgres_tools()
        if tools is None:
            raise SystemExit("bench: initdb and pg_ctl not found (PostgreSQL server package)")
        postgres = ThrowawayPostgres(tools).init()
        env = {"DATABASE_URL": postgres.url, "REDIS_URL": ""}
    elif mode in ("serve", "redis"):
        if not postgres_available():
            raise SystemExit("bench: PostgreSQL is not reachable (RUNYARD_TEST_POSTGRES)")
        database = create_database("runyard_bench")
        # Without Redis, `serve` runs in-process on PostgreSQL, as the test fixture does.
        env = {"DATABASE_URL": database, "REDIS_URL": ""}
    if mode == "redis":
        _require_redis(redis_url)
        prefix = f"runyard-bench-{uuid.uuid4().hex[:12]}:"
        env.update({"REDIS_URL": redis_url, "RUNYARD_REDIS_PREFIX": prefix})
    deployment = Deployment(mode, workdir, {**env, **overrides}, postgres=postgres)
    clean = False
    try:
        # Probe first: invalid settings fail here with pydantic's message, before any start-up.
        deployment.effective = deployment.settings()
        log.info("bench_settings non_default=%s", json.dumps(deployment.effective))
        deployment.start(instances)
        for server in deployment.servers:
            log.info(
                "bench_server_started mode=%s url=%s log=%s", mode, server.url, server.log_path
            )
        yield deployment
        clean = True
    finally:
        deployment.stop()
        if database is not None:
            drop_database(database)
        if postgres is not None:
            postgres.destroy()
        if prefix is not None:
            _delete_keys(redis_url, prefix)
        if clean and not keep_logs:
            shutil.rmtree(workdir, ignore_errors=True)
        else:
            log.warning("bench_server_logs_kept path=%s", workdir)


def _require_redis(url: str) -> None:
    try:
        with redis.Redis.from_url(url, socket_timeout=3, socket_connect_timeout=3) as client:
            client.ping()
    except (redis.RedisError, OSError) as exc:
        raise SystemExit(f"bench: Redis is not reachable at {url} ({exc})") from None


def _delete_keys(url: str, prefix: str) -> None:
    """Delete the deployment's keys (SCAN + DEL: never KEYS or FLUSHDB on a shared Redis)."""
    deleted = 0
    with redis.Redis.from_url(url, socket_timeout=10) as client:
        batch: list[Any] = []
        for key in client.scan_iter(match=f"{prefix}*", count=1000):
            batch.append(key)
            if len(batch) >= 500:
                deleted += int(client.delete(*batch))
                batch = []
        if batch:
            deleted += int(client.delete(*batch))
    log.info("bench_redis_keys_deleted prefix=%s count=%s", prefix, deleted)
