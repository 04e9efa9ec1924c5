"""A private Docker daemon for one test run, and a base image built without a registry.

The daemon has its own data root, exec root and socket, no bridge network and no iptables
rules: containers run with host networking only. No image registry is reachable here, so the
base image is a debootstrap of Debian bookworm with Python, imported into the daemon; its
tarball is cached outside the repository so later test runs skip the debootstrap. PostgreSQL,
Redis and nginx images are built on that base from Debian's packages; they live in the
daemon's data root, cached in the same place, so later runs reuse them.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import textwrap
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

CACHE_DIR = Path(os.environ.get("RUNYARD_TEST_CACHE", "/var/cache/runyard-test"))
BASE_SUITE = "bookworm"
BASE_PACKAGES = ("python3", "python3-venv", "python3-pip", "ca-certificates")
BASE_TAG = "runyard-test-base:bookworm"
DEFAULT_MIRROR = "http://deb.debian.org/debian"
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
                self._remove_containers()  # left by a test run that was killed
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
        self._remove_containers()
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

    def _remove_containers(self) -> None:
        listed = subprocess.run(
            self.command("ps", "-aq"), capture_output=True, check=False, timeout=30
        )
        ids = listed.stdout.decode().split()
        if ids:
            subprocess.run(
                self.command("rm", "-f", *ids), capture_output=True, check=False, timeout=60
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


def apt_mirror() -> str:
    """The Debian mirror apt uses on this machine (deb822 or one-line sources)."""
    sources = [Path("/etc/apt/sources.list"), *Path("/etc/apt/sources.list.d").glob("*")]
    for source in sources:
        try:
            text = source.read_text()
        except OSError:
            continue
        for match in re.finditer(r"(?:^URIs:\s*|^deb\s+(?:\[[^]]*\]\s+)?)(\S+)", text, re.M):
            uri = match.group(1).rstrip("/")
            if uri.endswith("/debian"):
                return uri
    return DEFAULT_MIRROR


def base_tarball() -> Path:
    """The cached root filesystem of the base image, made by debootstrap when missing."""
    key = hashlib.sha256(" ".join((BASE_SUITE, *BASE_PACKAGES)).encode()).hexdigest()[:12]
    tarball = CACHE_DIR / f"{BASE_SUITE}-python-{key}.tar"
    if tarball.is_file():
        return tarball
    debootstrap = _which("debootstrap")
    if debootstrap is None:
        raise DockerUnavailable("debootstrap is not installed (apt-get install debootstrap)")
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="rootfs-", dir=CACHE_DIR) as scratch:
        rootfs = Path(scratch) / "rootfs"
        result = subprocess.run(
            [
                debootstrap,
                "--variant=minbase",
                f"--include={','.join(BASE_PACKAGES)}",
                BASE_SUITE,
                str(rootfs),
                apt_mirror(),
            ],
            capture_output=True,
            check=False,
            timeout=1200,
        )
        if result.returncode != 0:
            raise DockerUnavailable(
                "debootstrap of the base image failed:\n"
                + result.stdout.decode(errors="replace")[-2000:]
            )
        for leftover in ("var/cache/apt/archives", "var/lib/apt/lists"):
            shutil.rmtree(rootfs / leftover, ignore_errors=True)
        partial = tarball.with_suffix(".partial")
        subprocess.run(
            ["tar", "-C", str(rootfs), "--numeric-owner", "-cf", str(partial), "."],
            check=True,
            timeout=600,
        )
        partial.rename(tarball)
    return tarball


def import_base_image(daemon: DockerDaemon) -> str:
    """Import the cached base root filesystem into the daemon, trusting what this machine
    trusts (its CA bundle, which a TLS-inspecting proxy may require for PyPI); return its tag.
    """
    tarball = base_tarball()
    ca = HOST_CA_BUNDLE.read_bytes() if HOST_CA_BUNDLE.is_file() else b""
    key = f"{tarball.name}-{hashlib.sha256(ca).hexdigest()[:12]}"
    present = subprocess.run(
        daemon.command("image", "inspect", "--format", "{{.Config.Labels}}", BASE_TAG),
        capture_output=True,
        check=False,
        timeout=30,
    )
    if key in present.stdout.decode():
        # Already imported in this (cached) data root: same image id, so builds stay warm.
        return BASE_TAG
    raw = f"{BASE_TAG}-rootfs"
    daemon.run(
        "import",
        "--change",
        "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "--change",
        'CMD ["/bin/bash"]',
        str(tarball),
        raw,
        timeout=600,
    )
    with tempfile.TemporaryDirectory(prefix="base-") as scratch:
        context = Path(scratch)
        lines = [f"FROM {raw}", f"LABEL runyard.base={key}"]
        if ca:
            shutil.copyfile(HOST_CA_BUNDLE, context / "ca-certificates.crt")
            lines += [
                f"COPY ca-certificates.crt {HOST_CA_BUNDLE}",
                f"ENV PIP_CERT={HOST_CA_BUNDLE} SSL_CERT_FILE={HOST_CA_BUNDLE}",
            ]
        (context / "Dockerfile").write_text("\n".join(lines) + "\n")
        daemon.run("build", "--network", "host", "-t", BASE_TAG, str(context), timeout=300)
    return BASE_TAG


# Stand-ins for the official postgres, redis and nginx images, from the same base with
# Debian's packages: no registry is reachable. The postgres one follows the official image's
# interface (POSTGRES_USER, POSTGRES_PASSWORD, POSTGRES_DB, PGDATA, `postgres` command).
SERVICE_IMAGES = {
    "runyard-test-postgres:15": (
        "postgresql-15",
        "ENV PATH=/usr/lib/postgresql/15/bin:$PATH PGDATA=/var/lib/postgresql/data\n"
        "COPY entrypoint.sh /usr/local/bin/entrypoint.sh\n"
        'ENTRYPOINT ["/bin/sh", "/usr/local/bin/entrypoint.sh"]\n'
        'CMD ["postgres"]\n',
    ),
    "runyard-test-redis:7": (
        "redis-server",
        'WORKDIR /data\nCMD ["redis-server"]\n',
    ),
    "runyard-test-nginx:1": (
        "nginx",
        'CMD ["nginx", "-g", "daemon off;"]\n',
    ),
}

POSTGRES_ENTRYPOINT = textwrap.dedent(
    """\
    #!/bin/sh
    # The official image's start-up, in short: a first start initialises $PGDATA with
    # POSTGRES_USER, POSTGRES_PASSWORD and POSTGRES_DB; then the command runs as postgres.
    set -e
    if [ "$1" = postgres ]; then
        mkdir -p "$PGDATA" /var/run/postgresql
        chown -R postgres:postgres "$PGDATA" /var/run/postgresql
        chmod 700 "$PGDATA"
        if [ ! -s "$PGDATA/PG_VERSION" ]; then
            printf '%s\\n' "$POSTGRES_PASSWORD" > /tmp/pw && chown postgres /tmp/pw
            runuser -u postgres -- initdb -D "$PGDATA" -U "$POSTGRES_USER" --pwfile=/tmp/pw \\
                --auth-local=trust --auth-host=scram-sha-256 >/dev/null
            rm -f /tmp/pw
            echo "host all all all scram-sha-256" >> "$PGDATA/pg_hba.conf"
            echo "listen_addresses = '*'" >> "$PGDATA/postgresql.conf"
            runuser -u postgres -- pg_ctl -D "$PGDATA" -o "-c listen_addresses=" -w start
            runuser -u postgres -- psql -U "$POSTGRES_USER" -d postgres \\
                -c "CREATE DATABASE \\"$POSTGRES_DB\\""
            runuser -u postgres -- pg_ctl -D "$PGDATA" -m fast -w stop
        fi
        exec runuser -u postgres -- "$@"
    fi
    exec "$@"
    """
)


def build_service_images(daemon: DockerDaemon, base: str) -> dict[str, str]:
    """Build the postgres, redis and nginx stand-ins on `base` (cached by the daemon's
    build cache when its data root is); return their tags by service."""
    tags = {}
    for tag, (package, tail) in SERVICE_IMAGES.items():
        with tempfile.TemporaryDirectory(prefix="svc-") as scratch:
            context = Path(scratch)
            (context / "entrypoint.sh").write_text(POSTGRES_ENTRYPOINT)
            (context / "Dockerfile").write_text(
                f"FROM {base}\n"
                # No cluster at install time: the entrypoint makes one in $PGDATA.
                "RUN mkdir -p /etc/postgresql-common \\\n"
                "    && echo 'create_main_cluster = false' "
                "> /etc/postgresql-common/createcluster.conf \\\n"
                "    && apt-get update -qq \\\n"
                "    && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "
                f"--no-install-recommends {package} >/dev/null \\\n"
                "    && rm -rf /var/lib/apt/lists/*\n" + tail
            )
            daemon.run("build", "--network", "host", "-t", tag, str(context), timeout=900)
        tags[tag.split(":")[0].removeprefix("runyard-test-")] = tag
    return tags
