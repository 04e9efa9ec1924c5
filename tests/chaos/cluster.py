"""A cluster of real `runyard serve` processes on PostgreSQL and Redis, and a throwaway Redis."""

from __future__ import annotations

import asyncio
import json
import signal
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
import redis
from langgraph_sdk import get_client
from langgraph_sdk.client import LangGraphClient
from langgraph_sdk.schema import StreamMode

from tests.support.server import ServerProcess, start_together

CHAOS_CONFIG = Path(__file__).resolve().parent / "graphs" / "langgraph.json"
SHARED_REDIS = "redis://127.0.0.1:6379/0"
TERMINAL = frozenset({"success", "error", "interrupted", "timeout"})

# Short timings so leases expire and reapers act within seconds.
CHAOS_ENV = {
    "LEASE_DURATION_SECONDS": "3",
    "HEARTBEAT_INTERVAL_SECONDS": "0.5",
    "REAPER_INTERVAL_SECONDS": "0.5",
    "STUCK_PENDING_THRESHOLD_SECONDS": "2",
    "POSTGRES_POLL_INTERVAL_SECONDS": "0.5",
    "WORKER_DRAIN_TIMEOUT": "2",
    "BG_JOB_MAX_RETRIES": "3",
    "RUNYARD_KEEPALIVE_SECONDS": "1",
}

# The timings users run (runyard/settings.py defaults): faults are tested with these too.
DEFAULT_ENV = {
    "LEASE_DURATION_SECONDS": "8",
    "HEARTBEAT_INTERVAL_SECONDS": "2",
    "REAPER_INTERVAL_SECONDS": "1",
    "STUCK_PENDING_THRESHOLD_SECONDS": "30",
    "POSTGRES_POLL_INTERVAL_SECONDS": "2",
    "WORKER_DRAIN_TIMEOUT": "30",
    "BG_JOB_MAX_RETRIES": "3",
}


@dataclass
class Instance:
    """One `runyard serve` process of a cluster and its clients."""

    name: str
    server: ServerProcess
    client: LangGraphClient
    http: httpx.AsyncClient
    paused: bool = False

    @property
    def pid(self) -> int:
        """The server's process id (the pid the graphs log)."""
        assert self.server.process is not None
        return self.server.process.pid

    @property
    def url(self) -> str:
        """Base URL."""
        return self.server.url

    def alive(self) -> bool:
        """True while the process has not exited and is not paused (SIGSTOP)."""
        proc = self.server.process
        return proc is not None and proc.poll() is None and not self.paused

    def signal(self, sig: signal.Signals) -> None:
        """Send a signal to the process (SIGSTOP/SIGCONT also mark it paused/resumed)."""
        self.server.signal(sig)
        if sig == signal.SIGSTOP:
            self.paused = True
        elif sig == signal.SIGCONT:
            self.paused = False

    def kill(self) -> None:
        """SIGKILL and reap."""
        proc = self.server.process
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)

    def log_tail(self, chars: int = 3000) -> str:
        """The end of the server's output, for failure messages."""
        path = self.server.log_path
        return path.read_text(errors="replace")[-chars:] if path.exists() else ""


@dataclass
class Cluster:
    """A fresh database, a private Redis key prefix and N `runyard serve` instances."""

    workdir: Path
    database_url: str
    redis_url: str
    prefix: str
    env: dict[str, str]
    config: Path = CHAOS_CONFIG
    # The database is at the newest schema already (a copy of the migrated template).
    migrated: bool = False
    instances: list[Instance] = field(default_factory=list)
    _count: int = 0
    # Instance names by port, given when each server is made: servers made together (or
    # replaced concurrently) are wrapped later, when the count has moved on.
    _names: dict[int, str] = field(default_factory=dict)

    @property
    def graph_log(self) -> Path:
        """The file the chaos graphs append their JSON lines to."""
        return self.workdir / "graph.log"

    @property
    def queue_key(self) -> str:
        """The Redis hash of queued run ids (to their fairness group)."""
        return f"{self.prefix}queue:waiting"

    @property
    def queue_keys(self) -> list[str]:
        """Every key that holds the queue of runs in the default fairness group."""
        return [
            f"{self.prefix}queue:group:default",
            f"{self.prefix}queue:turns",
            f"{self.prefix}queue:waiting",
        ]

    def _server(self, migrate: bool, **overrides: str) -> ServerProcess:
        self._count += 1
        env = {
            **self.env,
            **overrides,
            "RUNYARD_MIGRATE_ON_START": "true" if migrate else "false",
            "RUNYARD_DATA_DIR": str(self.workdir / f"data-{self._count}"),
        }
        server = ServerProcess("serve", self.workdir, env=env, config=self.config)
        self._names[server.port] = f"i{self._count}"
        return server

    def _wrap(self, server: ServerProcess) -> Instance:
        name = self._names[server.port]
        client = get_client(url=server.url, api_key=None, timeout=30)
        http = httpx.AsyncClient(base_url=server.url, timeout=30)
        return Instance(name, server, client, http)

    def start(self, count: int) -> list[Instance]:
        """Start instances in parallel; on a database not yet migrated, the first migrates
        alone before the others start (they refuse a schema that is not current)."""
        started: list[Instance] = []
        servers: list[ServerProcess] = []
        if not self.instances and count > 0:
            if self.migrated:
                servers.append(self._server(migrate=True))
            else:
                started.append(self.add(migrate=True))
            count -= 1
        servers += [self._server(migrate=False) for _ in range(count)]
        start_together(servers)
        for server in servers:
            instance = self._wrap(server)
            self.instances.append(instance)
            started.append(instance)
        return started

    def add(self, migrate: bool = False, **overrides: str) -> Instance:
        """Start one more instance (with these settings on top) and wait until it answers."""
        server = self._server(migrate, **overrides).start()
        instance = self._wrap(server)
        self.instances.append(instance)
        return instance

    async def replace(self, dead: Instance) -> Instance:
        """Start a new instance in place of a dead one (off the event loop)."""
        server = self._server(migrate=False)
        await asyncio.to_thread(server.start)
        instance = self._wrap(server)
        self.instances[self.instances.index(dead)] = instance
        await dead.http.aclose()
        await dead.client.http.client.aclose()
        return instance

    def by_pid(self, pid: int) -> Instance:
        """The instance whose process has this pid."""
        for instance in self.instances:
            if instance.pid == pid:
                return instance
        raise AssertionError(f"no instance has pid {pid}: {[i.pid for i in self.instances]}")

    def live(self) -> Instance:
        """The first instance whose process runs."""
        for candidate in self.instances:
            if candidate.alive():
                return candidate
        raise AssertionError("no live instance")

    def other(self, instance: Instance) -> Instance:
        """A live instance other than `instance`."""
        for candidate in self.instances:
            if candidate is not instance and candidate.alive():
                return candidate
        raise AssertionError("no other live instance")

    def log_lines(self) -> list[dict[str, Any]]:
        """Every line the graphs logged so far (a torn last line is skipped)."""
        return read_log_lines(self.graph_log)

    def steps_input(self, delay: float) -> dict[str, Any]:
        """Input of the `steps` graph."""
        return {"log": str(self.graph_log), "delay": delay}

    def redis(self) -> redis.Redis:
        """A synchronous client of the cluster's Redis."""
        return redis.Redis.from_url(self.redis_url, socket_timeout=5)

    def sql(self, statement: str, *params: Any) -> list[tuple[Any, ...]]:
        """Run one statement on the cluster's database; its rows, if it returns any."""
        url = self.database_url.replace("postgresql+asyncpg://", "postgresql://")
        with psycopg.connect(url, autocommit=True) as conn:
            cursor = conn.execute(statement, params)  # type: ignore[arg-type]
            return list(cursor.fetchall()) if cursor.description is not None else []

    def tails(self) -> str:
        """The end of every instance's log, for failure messages."""
        return "\n".join(f"--- {i.name} pid={i.pid}\n{i.log_tail()}" for i in self.instances)

    async def close(self) -> None:
        """Kill every instance (resuming stopped ones first) and close the clients."""
        for instance in self.instances:
            proc = instance.server.process
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGCONT)
            instance.kill()
            await instance.http.aclose()
            await instance.client.http.client.aclose()


async def wait_until(
    check: Callable[[], Awaitable[bool]] | Callable[[], bool],
    timeout: float,
    what: str,
    interval: float = 0.1,
) -> float:
    """Poll `check` until true; returns the seconds it took, fails after `timeout`."""
    started = time.monotonic()
    while True:
        result = check()
        if asyncio.iscoroutine(result):
            result = await result
        if result:
            return time.monotonic() - started
        if time.monotonic() - started > timeout:
            pytest.fail(f"timed out after {timeout:g} s waiting for {what}")
        await asyncio.sleep(interval)


async def run_status(instance: Instance, thread_id: str, run_id: str) -> dict[str, Any]:
    """The run as an instance reports it."""
    return dict(await instance.client.runs.get(thread_id, run_id))


RunRef = tuple[str, str]  # (thread_id, run_id)
ClusterFactory = Callable[..., Awaitable[Cluster]]


async def submit(
    instance: Instance,
    graph: str,
    graph_input: dict[str, Any],
    stream_mode: list[StreamMode] | None = None,
) -> RunRef:
    """Create a background run on a new thread through `instance`."""
    thread_id = str(uuid.uuid4())
    run = await instance.client.runs.create(
        thread_id,
        graph,
        input=graph_input,
        if_not_exists="create",
        stream_mode=stream_mode or ["updates"],
    )
    return thread_id, str(run["run_id"])


async def statuses(cluster: Cluster, refs: list[RunRef]) -> dict[str, str]:
    """Run id → status, read through the first live instance."""
    instance = cluster.live()
    out: dict[str, str] = {}
    for thread_id, run_id in refs:
        out[run_id] = (await instance.client.runs.get(thread_id, run_id))["status"]
    return out


async def wait_terminal(cluster: Cluster, refs: list[RunRef], timeout: float) -> dict[str, str]:
    """Poll until every run is terminal; fails with the statuses and server logs otherwise."""
    deadline = time.monotonic() + timeout
    seen: dict[str, str] = {}
    while time.monotonic() < deadline:
        try:
            seen = await statuses(cluster, refs)
        except (httpx.HTTPError, AssertionError):
            await asyncio.sleep(0.2)
            continue
        if all(status in TERMINAL for status in seen.values()):
            return seen
        await asyncio.sleep(0.2)
    pytest.fail(f"runs not terminal after {timeout:g} s: {seen}\n{cluster.tails()}")


def read_log_lines(path: Path) -> list[dict[str, Any]]:
    """Every line the chaos graphs logged to `path` so far (a torn last line is skipped)."""
    if not path.exists():
        return []
    lines = []
    for raw in path.read_text().splitlines():
        try:
            lines.append(json.loads(raw))
        except json.JSONDecodeError:
            continue
    return lines


def lines_of(lines: list[dict[str, Any]], run_id: str, **match: Any) -> list[dict[str, Any]]:
    """The log lines of one run, optionally filtered by field values."""
    return [
        line
        for line in lines
        if line["run_id"] == run_id and all(line.get(k) == v for k, v in match.items())
    ]


def done_counts(lines: list[dict[str, Any]], run_id: str) -> dict[str, int]:
    """How many times each node of a run logged `done`."""
    counts: dict[str, int] = {}
    for line in lines_of(lines, run_id, phase="done"):
        counts[line["node"]] = counts.get(line["node"], 0) + 1
    return counts


def concurrent_attempts(lines: list[dict[str, Any]], run_id: str) -> list[tuple[int, int]]:
    """Pairs of the run's attempts whose logged activity overlapped in time (ran side by side).

    An attempt's activity spans its first to its last logged line.
    """
    spans: dict[int, tuple[float, float]] = {}
    for line in lines_of(lines, run_id):
        first, last = spans.get(line["attempt"], (line["t"], line["t"]))
        spans[line["attempt"]] = (min(first, line["t"]), max(last, line["t"]))
    ordered = sorted(spans.items(), key=lambda item: item[1][0])
    return [
        (a, b)
        for index, (a, (_, a_end)) in enumerate(ordered)
        for b, (b_start, _) in ordered[index + 1 :]
        if b_start < a_end
    ]


def steps_done_twice(lines: list[dict[str, Any]], run_id: str) -> int:
    """How many of the run's steps finished more than once (a side effect repeated)."""
    return sum(count - 1 for count in done_counts(lines, run_id).values() if count > 1)
