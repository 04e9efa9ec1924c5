"""A private Docker daemon for one test run, and images built without a registry.

The daemon has its own data root, exec root and socket, no bridge network and no iptables
rules: containers run with host networking only. No image registry is reachable here, so the
images come from `runyard base-images`, the offline recipe of docs/deploying.md: a
debootstrap of Debian bookworm with Python as the base (its tarball cached outside the
repository, so later test runs skip the debootstrap), and PostgreSQL, Redis and nginx built
on it from Debian's packages; they live in the daemon's data root, cached in the same place,
so later runs reuse them.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

CACHE_DIR = Path(os.environ.get("RUNYARD_TEST_CACHE", "/var/cache/runyard-test"))
HOST_CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")


class DockerUnavailable(Exception):
    """The daemon cannot run on this machine; the message says why."""


def _which(name: str) -> str | None:
    for folder in ("/usr/sbin", "/usr/bin", "/sbin", "/bin"):
        candidate = Path(folder) / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return shutil.which(name)


@dataclass
class DockerDaemon:
    """`dockerd` started as root with `--bridge=none --iptables=false`, stopped by `stop`."""

    root: Path
    # Images and build cache; under CACHE_DIR it outlives the test run, so builds are warm.
    data_root: Path | None = None
    process: subprocess.Popen[bytes] | None = None
    client: str = field(default="")

    @property
    def socket(self) -> Path:
        """The daemon's API socket."""
        return self.root / "docker.sock"

    @property
    def log_path(self) -> Path:
        """Where the daemon's output goes."""
        return self.root / "dockerd.log"

    def start(self, timeout: float = 60.0) -> DockerDaemon:
        """Start the daemon and wait for it to answer; DockerUnavailable says why it cannot."""
        if os.geteuid() != 0:
            raise DockerUnavailable("dockerd must run as root and this test is not root")
        dockerd = _which("dockerd")
        client = _which("docker")
        if dockerd is None or client is None:
            raise DockerUnavailable("dockerd is not installed (apt-get install docker.io)")
        self.client = client
        # Unix sockets are limited to ~108 bytes: keep the exec root short.
        self.root.mkdir(parents=True, exist_ok=True)
        exec_root = Path(tempfile.mkdtemp(prefix="dkx-", dir="/tmp"))
        args = [
            dockerd,
            "--bridge=none",
            "--iptables=false",
            "--ip6tables=false",
            "--data-root",
            str(self.data_root or self.root / "data"),
            "--exec-root",
            str(exec_root),
            "--pidfile",
            str(exec_root / "dockerd.pid"),
            "-H",
            f"unix://{self.socket}",
        ]
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise DockerUnavailable(
                    f"dockerd exited with code {self.process.returncode}:\n{self._log_tail()}"
                )
            probe = subprocess.run(
                self.command("version", "--format", "{{.Server.Version}}"),
                capture_output=True,
                check=False,
                timeout=10,
            )
            if probe.returncode == 0:
                self.remove_leftovers()  # of a test run that was killed or failed
                return self
            time.sleep(0.3)
        self.stop()
        raise DockerUnavailable(
            f"dockerd did not answer within {timeout:.0f}s:\n{self._log_tail()}"
        )

    def command(self, *args: str) -> list[str]:
        """A docker CLI command line aimed at this daemon."""
        return [self.client, "-H", f"unix://{self.socket}", *args]

    def run(
        self, *args: str, timeout: float = 120.0, input_bytes: bytes | None = None
    ) -> subprocess.CompletedProcess[bytes]:
        """Run a docker CLI command; a failure raises with its output."""
        result = subprocess.run(
            self.command(*args),
            capture_output=True,
            input=input_bytes,
            timeout=timeout,
            check=False,
        )
        if result.returncode != 0:
            raise RuntimeError(
                f"docker {' '.join(args[:3])} failed ({result.returncode}):\n"
                f"{result.stdout.decode(errors='replace')[-3000:]}"
                f"{result.stderr.decode(errors='replace')[-3000:]}"
            )
        return result

    def stop(self) -> None:
        """Stop every container, then the daemon (SIGTERM, SIGKILL if it hangs)."""
        if self.process is None or self.process.poll() is not None:
            return
        self.remove_leftovers()
        # Images replaced by newer builds; the layers of the current ones stay as build cache.
        subprocess.run(
            self.command("image", "prune", "-f"), capture_output=True, check=False, timeout=120
        )
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)

    def remove_leftovers(self) -> None:
        """Remove every container, then every volume, that a test run left behind.

        A run that was killed, or failed before its teardown, leaves its compose project's
        volumes in the cached data root; the next run's PostgreSQL would start on the old
        database volume, initialised with the old run's password, and refuse the new one
        (`password authentication failed for user "runyard"`). Images stay: they are the
        cache. Only test runs use this daemon, so none of its volumes is anyone's data."""
        for listing, removal in (
            (("ps", "-aq"), ("rm", "-f")),
            (("volume", "ls", "-q"), ("volume", "rm", "-f")),
        ):
            listed = subprocess.run(
                self.command(*listing), capture_output=True, check=False, timeout=30
            )
            names = listed.stdout.decode().split()
            if names:
                subprocess.run(
                    self.command(*removal, *names), capture_output=True, check=False, timeout=60
                )

    def _log_tail(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-2000:]
        except OSError:
            return "(no log)"


@contextmanager
def cached_data_root(wait: float = 0.0) -> Iterator[Path | None]:
    """The daemon data root kept in CACHE_DIR, locked for the block; None when another
    test run still holds it after `wait` seconds (its daemon owns it, so this one starts
    from scratch). Only one dockerd at a time uses the cached root."""
    try:
        CACHE_DIR.mkdir(parents=True, exist_ok=True)
        lock = (CACHE_DIR / "dockerd.lock").open("w")
    except OSError:
        yield None
        return
    with lock:
        deadline = time.monotonic() + wait
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError:
                if time.monotonic() >= deadline:
                    yield None
                    return
                time.sleep(1.0)
        yield CACHE_DIR / "dockerd"


def debian_images(daemon: DockerDaemon, base_only: bool = False) -> list[str]:
    """`runyard base-images`, the offline recipe of docs/deploying.md, run against `daemon` with the
    root filesystem cached in CACHE_DIR and this machine's CA bundle (a TLS-inspecting proxy
    may stand between the builds and PyPI); the `runyard up` (or `build`) flags it prints.
    DockerUnavailable when this machine lacks what it needs (debootstrap, root)."""
    command = [sys.executable, "-m", "runyard.cli", "base-images", "--cache", str(CACHE_DIR)]
    if HOST_CA_BUNDLE.is_file():
        command += ["--ca-certificates", str(HOST_CA_BUNDLE)]
    if base_only:
        command.append("--base-only")
    env = {**os.environ, "DOCKER_HOST": f"unix://{daemon.socket}"}
    env["PATH"] = f"{Path(daemon.client).parent}:{env.get('PATH', '')}"
    result = subprocess.run(
        command, env=env, capture_output=True, text=True, timeout=2400, check=False
    )
    output = result.stdout + result.stderr
    if result.returncode != 0:
        if "is not installed" in output or "must run as root" in output:
            raise DockerUnavailable(output.strip().splitlines()[-1])
        raise AssertionError(f"runyard base-images failed:\n{output[-4000:]}")
    flags = re.search(r"use them with: runyard (?:up|build) (.+)$", result.stdout, re.M)
    assert flags is not None, output[-3000:]
    return flags.group(1).split()
