"""Starts real `runyard` server processes on free ports and stops (or kills) them."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]
TEST_CONFIG = ROOT / "tests" / "graphs" / "langgraph.json"


def free_port() -> int:
    """A port nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class ServerProcess:
    """One `runyard dev` or `runyard serve` process."""

    mode: str
    workdir: Path
    env: dict[str, str] = field(default_factory=dict)
    config: Path = TEST_CONFIG
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """Base URL of the server."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def backend(self) -> str:
        """The storage backend of the `server` fixtures: `sqlite` for dev, else `postgres`."""
        return "sqlite" if self.mode == "dev" else "postgres"

    @property
    def log_path(self) -> Path:
        """Where the server's output goes."""
        return self.workdir / f"server-{self.port}.log"

    def start(self, timeout: float = 60.0) -> ServerProcess:
        """Start the process and wait until /ok answers."""
        args = [sys.executable, "-m", "runyard.cli", self.mode, "--port", str(self.port)]
        args += ["--config", str(self.config)]
        if self.mode == "dev":
            args.append("--no-reload")
        env = {
            **os.environ,
            "RUNYARD_DATA_DIR": str(self.workdir / "data"),
            # The suite's crons fire every second, and its shared servers make many; the
            # limits' own tests (test_cron_limits.py) set them back.
            "RUNYARD_CRON_MIN_INTERVAL_SECONDS": "1",
            "RUNYARD_MAX_CRONS_PER_USER": "100000",
            **self.env,
        }
        self.workdir.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                args, cwd=str(ROOT), env=env, stdout=log, stderr=subprocess.STDOUT
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"server exited early:\n{self.log_path.read_text()[-4000:]}")
            try:
                if httpx.get(f"{self.url}/ok", timeout=1).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"server did not start:\n{self.log_path.read_text()[-4000:]}")

    def signal(self, sig: signal.Signals) -> None:
        """Send a signal to the server process."""
        assert self.process is not None
        self.process.send_signal(sig)

    def stop(self, timeout: float = 20.0) -> None:
        """SIGTERM, then SIGKILL if it does not exit in time."""
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)


def start_together(servers: Sequence[ServerProcess], timeout: float = 60.0) -> None:
    """Start several servers at once, at most one per core, and wait until each answers.

    A start is mostly the interpreter importing Runyard, on one core: on the 2-core test
    machines two start in about the time of one. Each may take as long as the servers would
    have taken one after another (`timeout` each), so a busy machine is no reason to fail.
    When one fails to start, those that did start are stopped too (no caller holds them
    yet), and the first error is raised.
    """
    workers = max(1, min(len(servers), os.cpu_count() or 1))
    try:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            list(pool.map(lambda server: server.start(timeout * len(servers)), servers))
    except BaseException:
        for server in servers:
            server.stop()
        raise
