"""Images for `runyard build` and `runyard up` made from Debian packages, with no registry.

`runyard base-images` debootstraps Debian bookworm with Python into a root filesystem
(cached as a tarball), imports it as the base image, and builds PostgreSQL, Redis and nginx
images on that base with Debian's packages. The PostgreSQL image follows the official one's
interface (POSTGRES_USER, POSTGRES_PASSWORD, POSTGRES_DB, PGDATA, the `postgres` command),
which is all `runyard up` relies on.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import textwrap
from dataclasses import dataclass
from pathlib import Path

from runyard.deploy.images import DeployError, docker_binary

SUITE = "bookworm"
BASE_PACKAGES = ("python3", "python3-venv", "python3-pip", "ca-certificates")
DEFAULT_MIRROR = "http://deb.debian.org/debian"
DEFAULT_CACHE = Path("/var/cache/runyard")
BASE_TAG = f"runyard-base:{SUITE}"
CA_PATH = "/etc/ssl/certs/ca-certificates.crt"

# Each service image: its tag (bookworm's major version), the Debian package, and the
# Dockerfile lines after the install.
SERVICES = {
    "postgres": (
        "runyard-postgres:15",
        "postgresql-15",
        "ENV PATH=/usr/lib/postgresql/15/bin:$PATH PGDATA=/var/lib/postgresql/data\n"
        "COPY entrypoint.sh /usr/local/bin/entrypoint.sh\n"
        'ENTRYPOINT ["/bin/sh", "/usr/local/bin/entrypoint.sh"]\n'
        'CMD ["postgres"]\n',
    ),
    "redis": ("runyard-redis:7", "redis-server", 'WORKDIR /data\nCMD ["redis-server"]\n'),
    "nginx": ("runyard-nginx:1.22", "nginx", 'CMD ["nginx", "-g", "daemon off;"]\n'),
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


@dataclass(frozen=True)
class DebianImages:
    """The tags built: the base, and the services' by name (none with base only)."""

    base: str
    services: dict[str, str]

    def up_flags(self) -> list[str]:
        """The `runyard up` (or `runyard build`) flags that use these images."""
        flags = ["--base-image", self.base]
        for name, tag in self.services.items():
            flags += [f"--{name}-image", tag]
        return flags


def build_debian_images(
    cache: Path = DEFAULT_CACHE,
    mirror: str | None = None,
    ca_certificates: Path | None = None,
    base_only: bool = False,
    docker: list[str] | None = None,
) -> DebianImages:
    """Make (or reuse) the base image and, unless `base_only`, the service images on it."""
    command = docker or [docker_binary()]
    if ca_certificates is not None and not ca_certificates.is_file():
        raise DeployError(f"--ca-certificates {ca_certificates}: no such file")
    tarball = base_rootfs(cache, mirror or apt_mirror())
    base = import_base(command, tarball, ca_certificates)
    services = {} if base_only else build_service_images(command, base)
    return DebianImages(base, services)


def apt_mirror() -> str:
    """The Debian mirror apt uses on this machine (deb822 or one-line sources), else
    deb.debian.org."""
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


def base_rootfs(cache: Path, mirror: str) -> Path:
    """The base's root filesystem as a tarball in `cache`, debootstrapped when missing."""
    key = hashlib.sha256(" ".join((SUITE, *BASE_PACKAGES)).encode()).hexdigest()[:12]
    tarball = cache / f"{SUITE}-python-{key}.tar"
    if tarball.is_file():
        print(f"runyard: reusing the base's root filesystem {tarball}", flush=True)
        return tarball
    debootstrap = _sbin("debootstrap")
    if debootstrap is None:
        raise DeployError("debootstrap is not installed (on Debian: apt-get install debootstrap)")
    if os.geteuid() != 0:
        raise DeployError("debootstrap must run as root: run `runyard base-images` as root")
    cache.mkdir(parents=True, exist_ok=True)
    print(f"runyard: debootstrap {SUITE} from {mirror} (a few minutes)", flush=True)
    with tempfile.TemporaryDirectory(prefix="rootfs-", dir=cache) as scratch:
        rootfs = Path(scratch) / "rootfs"
        packages = ",".join(BASE_PACKAGES)
        args = [debootstrap, "--variant=minbase", f"--include={packages}", SUITE, str(rootfs)]
        result = subprocess.run([*args, mirror], capture_output=True, check=False, timeout=1800)
        if result.returncode != 0:
            output = (result.stdout + result.stderr).decode(errors="replace")
            raise DeployError(f"debootstrap failed (exit {result.returncode}):\n{output[-2000:]}")
        for leftover in ("var/cache/apt/archives", "var/lib/apt/lists"):
            shutil.rmtree(rootfs / leftover, ignore_errors=True)
        partial = tarball.with_suffix(".partial")
        tar = ["tar", "-C", str(rootfs), "--numeric-owner", "-cf", str(partial), "."]
        subprocess.run(tar, check=True, timeout=900)
        partial.rename(tarball)
    return tarball


def import_base(docker: list[str], tarball: Path, ca_certificates: Path | None) -> str:
    """Import `tarball` as the base image, with `ca_certificates` as its CA bundle (and
    pip's) when given; an image already imported from the same files is kept as it is, so
    the builds on it stay cached. Returns its tag."""
    ca = ca_certificates.read_bytes() if ca_certificates is not None else b""
    key = f"{tarball.name}-{hashlib.sha256(ca).hexdigest()[:12]}"
    labels = [*docker, "image", "inspect", "--format", "{{.Config.Labels}}", BASE_TAG]
    present = subprocess.run(labels, capture_output=True, check=False, timeout=60)
    if key in present.stdout.decode(errors="replace"):
        print(f"runyard: {BASE_TAG} is up to date", flush=True)
        return BASE_TAG
    raw = f"{BASE_TAG}-rootfs"
    path = "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    changes = ["--change", path, "--change", 'CMD ["/bin/bash"]']
    _docker(docker, "import", *changes, str(tarball), raw)
    lines = [f"FROM {raw}", f"LABEL runyard.base={key}"]
    with tempfile.TemporaryDirectory(prefix="runyard-base-") as scratch:
        if ca_certificates is not None:
            shutil.copyfile(ca_certificates, Path(scratch) / "ca-certificates.crt")
            lines += [
                f"COPY ca-certificates.crt {CA_PATH}",
                f"ENV PIP_CERT={CA_PATH} SSL_CERT_FILE={CA_PATH}",
            ]
        (Path(scratch) / "Dockerfile").write_text("\n".join(lines) + "\n")
        _docker(docker, "build", "--network", "host", "-t", BASE_TAG, scratch)
    return BASE_TAG


def build_service_images(docker: list[str], base: str) -> dict[str, str]:
    """Build the PostgreSQL, Redis and nginx images on `base` (the build cache makes a
    second run quick); their tags by service."""
    tags = {}
    for name, (tag, package, tail) in SERVICES.items():
        with tempfile.TemporaryDirectory(prefix="runyard-svc-") as scratch:
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
            _docker(docker, "build", "--network", "host", "-t", tag, str(context))
        tags[name] = tag
    return tags


def _docker(docker: list[str], *args: str) -> None:
    print("runyard: docker " + " ".join(args), flush=True)
    result = subprocess.run([*docker, *args], check=False)
    if result.returncode != 0:
        raise DeployError(f"docker {args[0]} failed with exit code {result.returncode}")


def _sbin(name: str) -> str | None:
    # debootstrap lives in /usr/sbin, which a non-login root shell may not have on PATH.
    for folder in ("/usr/sbin", "/sbin"):
        candidate = Path(folder) / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return shutil.which(name)
