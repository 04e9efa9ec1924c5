"""Private Redis and PostgreSQL servers on free ports that a test may stop and restart.

The shared services on 6379 and 5432 are never touched: outage tests stop only these.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import psycopg
import redis

from tests.support.server import free_port

POSTGRES_BIN_DIRS = ("/usr/lib/postgresql/15/bin", "/usr/lib/postgresql/16/bin")


@dataclass
class ThrowawayRedis:
    """A redis-server without persistence; `stop` kills it, `start` brings it back."""

    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """Its URL."""
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> ThrowawayRedis:
        """Start (again, on the same port) and wait for PING."""
        self.process = subprocess.Popen(
            [
                "redis-server",
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--daemonize",
                "no",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                with redis.Redis(port=self.port, socket_timeout=1) as client:
                    if client.ping():
                        return self
            except (redis.RedisError, OSError):
                time.sleep(0.05)
        raise RuntimeError(f"redis-server on port {self.port} did not start")

    def stop(self) -> None:
        """SIGKILL it."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)


def postgres_tools() -> Path | None:
    """The folder holding initdb and pg_ctl, or None when PostgreSQL is not installed."""
    for folder in POSTGRES_BIN_DIRS:
        if (Path(folder) / "initdb").exists() and (Path(folder) / "pg_ctl").exists():
            return Path(folder)
    found = shutil.which("initdb")
    if found and shutil.which("pg_ctl"):
        return Path(found).resolve().parent
    return None


@dataclass
class ThrowawayPostgres:
    """A private PostgreSQL cluster (initdb) on a free port, trust auth, fsync off."""

    bin_dir: Path
    port: int = field(default_factory=free_port)
    root: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="runyard-pg-")))

    @property
    def url(self) -> str:
        """Its URL, for DATABASE_URL."""
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, *args: str) -> None:
        command = [str(self.bin_dir / args[0]), *args[1:]]
        # initdb and postgres refuse to run as root: use the postgres account then.
        if os.geteuid() == 0:
            command = ["runuser", "-u", "postgres", "--", *command]
        subprocess.run(command, check=True, capture_output=True, timeout=60)

    def init(self, configure: Callable[[Path], None] | None = None) -> ThrowawayPostgres:
        """Create the cluster and start it; `configure(data_dir)` may change its files first
        (postgresql.conf, pg_hba.conf, certificates), which then belong to postgres."""
        if os.geteuid() == 0:
            shutil.chown(self.root, "postgres", "postgres")
        data = self.root / "data"
        self._run("initdb", "-D", str(data), "-A", "trust", "-U", "postgres", "--no-sync")
        if configure is not None:
            configure(data)
            if os.geteuid() == 0:
                for path in data.iterdir():
                    shutil.chown(path, "postgres", "postgres")
        return self.start()

    def start(self) -> ThrowawayPostgres:
        """Start (again) on the same port and wait until it accepts connections."""
        options = f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off"
        self._run(
            "pg_ctl",
            "-D",
            str(self.root / "data"),
            "-o",
            options,
            "-l",
            str(self.root / "server.log"),
            "-w",
            "start",
        )
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                with psycopg.connect(self.url, connect_timeout=2):
                    return self
            except psycopg.Error:
                time.sleep(0.1)
        raise RuntimeError(f"throwaway PostgreSQL on port {self.port} did not start")

    def stop(self) -> None:
        """Stop at once, as a crash would (no checkpoint)."""
        self._run("pg_ctl", "-D", str(self.root / "data"), "-m", "immediate", "-w", "stop")

    def destroy(self) -> None:
        """Stop if running and delete every file."""
        try:
            self.stop()
        except subprocess.CalledProcessError:
            pass
        shutil.rmtree(self.root, ignore_errors=True)
