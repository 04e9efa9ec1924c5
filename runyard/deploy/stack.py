"""A `runyard up` deployment on Docker Compose: its files, start, readiness, logs and stop.

Works with the `docker compose` plugin (v2) and with Debian's `docker-compose` (1.29) alike,
using only the subcommands and flags both have.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from runyard.deploy.compose import (
    PASSWORD_VARIABLE,
    UPSTREAM_HEADER,
    Deployment,
    render_compose,
    render_deployment_nginx,
)
from runyard.deploy.docker_output import failure_hint, run_showing_output
from runyard.deploy.images import DeployError

COMPOSE_FILE = "docker-compose.yml"
VOLUMES = ("postgres-data", "redis-data")
LOG_LINES = 30


def compose_command(docker: list[str] | None = None) -> list[str]:
    """`docker compose` (v2) or `docker-compose` (v1), whichever is installed."""
    found = shutil.which("docker")
    command = docker or ([found] if found else None)
    if command:
        probe = subprocess.run([*command, "compose", "version"], capture_output=True, check=False)
        if probe.returncode == 0:
            return [*command, "compose"]
    legacy = shutil.which("docker-compose")
    if legacy:
        return [legacy]
    raise DeployError(
        "Docker Compose is not installed; install it (on Debian: apt-get install "
        "docker-compose), or run the image yourself with `runyard build` and `docker run`"
    )


def project_name(name: str) -> str:
    """The compose project of a Runyard project: `runyard-<name>`, as both composes spell it."""
    return "runyard-" + (re.sub(r"[^a-z0-9_-]+", "", name.lower()) or "project")


def write_deployment(deployment: Deployment, folder: Path) -> Path:
    """Write the compose file and nginx.conf into `folder`, and the `.env` holding a new
    random database password unless one is there already; return the compose file."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "nginx.conf").write_text(render_deployment_nginx(deployment))
    compose = folder / COMPOSE_FILE
    compose.write_text(render_compose(deployment))
    env = folder / ".env"
    existing = env.read_text() if env.is_file() else ""
    if not re.search(rf"^{PASSWORD_VARIABLE}=\S", existing, re.M):
        # Kept across runs: the database volume was initialised with it.
        lines = [existing.rstrip("\n")] if existing.strip() else []
        lines += [
            "# The deployment's secrets, read by docker compose; keep this file private.",
            f"{PASSWORD_VARIABLE}={secrets.token_hex(24)}",
        ]
        # Private from its creation on, not only after the write.
        descriptor = os.open(env, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "w") as file:
            file.write("\n".join(lines) + "\n")
    env.chmod(0o600)
    return compose


@dataclass(frozen=True)
class Stack:
    """One compose project: the command, its folder and its name."""

    compose: list[str]
    folder: Path
    project: str

    def command(self, *args: str) -> list[str]:
        """A compose command line aimed at this deployment."""
        compose_file = str(self.folder / COMPOSE_FILE)
        return [*self.compose, "-p", self.project, "-f", compose_file, *args]

    def volumes(self) -> list[str]:
        """The named volumes compose creates for this project."""
        return [f"{self.project}_{volume}" for volume in VOLUMES]

    def up(self, deployment: Deployment) -> None:
        """Start every service; on failure raise with the failing services' last log lines."""
        command = self.command("up", "-d", "--remove-orphans")
        print("runyard: " + " ".join(command), flush=True)
        result = run_showing_output(command)
        if result.returncode != 0:
            hint = failure_hint(result.tail)
            raise DeployError(
                f"docker compose up failed with exit code {result.returncode}"
                + (f": {hint}" if hint else "")
                + "\n"
                + self.failure_report(deployment, set())
            )

    def down(self, remove_volumes: bool) -> None:
        """Stop and remove the containers and the network; the volumes only when told."""
        command = self.command("down", "--remove-orphans", *(["-v"] if remove_volumes else []))
        print("runyard: " + " ".join(command), flush=True)
        result = subprocess.run(command, check=False)
        if result.returncode != 0:
            raise DeployError(f"docker compose down failed with exit code {result.returncode}")

    def wait_ready(self, deployment: Deployment, timeout: float) -> None:
        """Wait until nginx has answered `/ok` through every instance, or raise naming the
        services that did not come up (at once for one that exits or restarts), with their
        last log lines."""
        seen: set[str] = set()
        baseline = self.states()
        deadline = time.monotonic() + timeout
        next_check = time.monotonic() + 2
        while time.monotonic() < deadline:
            seen |= _answering_upstreams(deployment.url)
            if len(seen & set(deployment.upstreams)) == deployment.instances or (
                deployment.network == "bridge" and len(seen) >= deployment.instances
            ):
                return
            if time.monotonic() >= next_check:
                crashed = crashed_services(baseline, self.states())
                if crashed:
                    raise DeployError(
                        f"{', '.join(crashed)} exited or keeps restarting\n" + self.logs(crashed)
                    )
                next_check = time.monotonic() + 2
            time.sleep(0.3)
        raise DeployError(
            f"nginx on {deployment.url} did not answer /ok through every instance within "
            f"{timeout:.0f}s ({len(seen)} of {deployment.instances} answered)\n"
            + self.failure_report(deployment, seen)
        )

    def failure_report(self, deployment: Deployment, seen: set[str]) -> str:
        """The services that crashed or are not running, or the instances nginx never
        reached, with their last log lines."""
        failing = crashed_services({}, self.states())
        running = set(self._output("ps", "--services", "--filter", "status=running").split())
        if not failing:
            services = ("postgres", "redis", *deployment.instance_names, "lb")
            failing = [s for s in services if s not in running]
        if "postgres" in running and not any(s in running for s in deployment.instance_names):
            failing.insert(0, "migrate")  # the instances wait for it
        if not failing and deployment.network == "host":
            names = zip(deployment.instance_names, deployment.upstreams, strict=True)
            failing = [name for name, address in names if address not in seen]
        return self.logs(list(dict.fromkeys(failing)) or deployment.instance_names)

    def logs(self, services: list[str]) -> str:
        """The services named, then the last log lines of each."""
        parts = [f"not up: {', '.join(services)}"]
        for service in services:
            logs = self._output("logs", "--no-color", "--tail", str(LOG_LINES), service)
            parts.append(f"--- last log lines of {service} ---\n{logs.rstrip() or '(none)'}")
        return "\n".join(parts)

    def states(self) -> dict[str, tuple[int, str, str]]:
        """Each service's container as the docker CLI sees it: (restart count, status, exit
        code); empty without a docker CLI (Debian's docker-compose does not need one)."""
        docker = self.compose[0] if self.compose[-1] == "compose" else shutil.which("docker")
        if docker is None:
            return {}
        label = f"label=com.docker.compose.project={self.project}"
        listed = subprocess.run(
            [docker, "ps", "-aq", "--filter", label],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        if not listed.stdout.split():
            return {}
        service = '{{index .Config.Labels "com.docker.compose.service"}}'
        form = f"{service} {{{{.RestartCount}}}} {{{{.State.Status}}}} {{{{.State.ExitCode}}}}"
        inspected = subprocess.run(
            [docker, "inspect", "-f", form, *listed.stdout.split()],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        states = {}
        for line in inspected.stdout.splitlines():
            fields = line.split()
            if len(fields) == 4 and fields[1].isdigit():
                states[fields[0]] = (int(fields[1]), fields[2], fields[3])
        return states

    def _output(self, *args: str) -> str:
        result = subprocess.run(
            self.command(*args), capture_output=True, check=False, timeout=60, env=os.environ
        )
        return (result.stdout + result.stderr).decode(errors="replace")


def _answering_upstreams(url: str) -> set[str]:
    """The instances that answered a few `/ok` requests through nginx (its header)."""
    seen: set[str] = set()
    for _ in range(4):
        try:
            with urllib.request.urlopen(f"{url}/ok", timeout=2) as response:
                if response.status == 200:
                    # After a retry nginx lists every upstream tried; the last one answered.
                    tried = response.headers.get(UPSTREAM_HEADER, "")
                    seen.add(tried.split(",")[-1].strip())
        except (urllib.error.URLError, OSError):
            return seen
    return seen


def crashed_services(
    before: dict[str, tuple[int, str, str]], now: dict[str, tuple[int, str, str]]
) -> list[str]:
    """Services that exited or restarted since `before` (the migration: that failed)."""
    crashed = []
    for service, (restarts, status, code) in sorted(now.items()):
        stopped = status in ("exited", "dead", "restarting")
        if service == "migrate":
            if stopped and code != "0":
                crashed.append(service)
        elif stopped or restarts > before.get(service, (0, "", ""))[0]:
            crashed.append(service)
    return crashed
