"""The pods of `runyard k8s`'s manifests, started as the kubelet starts them: the manifest's
command and environment, the Secret's keys by reference and as variables, the pod's name,
a read-only root with a writable /tmp (bubblewrap, where it is installed), real PostgreSQL
and Redis. Only where the server listens differs: 127.0.0.1 and a free port.

The order the documentation gives: an instance refuses an unmigrated database with a
message, the migrations Job runs, then the instance starts, its probes answer, it runs a
graph, and SIGTERM stops it within its grace period."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from runyard.cli import main
from tests.support.databases import fresh_database
from tests.support.redis_keys import REDIS_URL, delete_keys
from tests.support.server import ROOT, free_port

TEMPLATE = ROOT / "tests" / "projects" / "deployable"
POD_NAME = "runyard-template-7d9f8c6b5-x2x4q"


def manifest(folder: Path, name: str) -> dict[str, Any]:
    """A resource of the base, read from its file."""
    (document,) = yaml.safe_load_all((folder / "base" / name).read_text())
    return dict(document)


def container_env(container: dict[str, Any], secret: dict[str, str]) -> dict[str, str]:
    """The variables the kubelet gives the container: `envFrom` first, `env` over it."""
    env: dict[str, str] = {}
    for source in container.get("envFrom", []):
        assert set(source) == {"secretRef"}
        env |= secret
    for entry in container["env"]:
        if "value" in entry:
            env[entry["name"]] = entry["value"]
        elif "secretKeyRef" in entry["valueFrom"]:
            ref = entry["valueFrom"]["secretKeyRef"]
            if ref["key"] in secret:
                env[entry["name"]] = secret[ref["key"]]
            else:
                assert ref.get("optional"), f"the pod would not start without {ref['key']}"
        else:
            assert entry["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
            env[entry["name"]] = POD_NAME
    return env


class Pod:
    """One container of the manifests, as a process."""

    def __init__(self, container: dict[str, Any], secret: dict[str, str], project: Path) -> None:
        self.port = free_port()
        command = [self._listen(part) for part in container["command"]]
        # The image's PATH leads to its `runyard`; here, this environment's.
        self.command = [str(Path(sys.executable).parent / command[0]), *command[1:]]
        # The image's own variables (runyard/deploy/dockerfile.py), then the manifest's.
        self.env = {
            "PATH": os.environ["PATH"],
            "RUNYARD_CONFIG": str(project / "langgraph.json"),
            "RUNYARD_DATA_DIR": str(project / "data"),
            **container_env(container, secret),
        }
        self.project = project
        self.process: subprocess.Popen[bytes] | None = None
        self.log = project.parent / f"pod-{self.port}.log"

    def _listen(self, part: str) -> str:
        return {"0.0.0.0": "127.0.0.1", "8000": str(self.port)}.get(part, part)

    def argv(self) -> list[str]:
        """The command, under a read-only root with a fresh /tmp when bubblewrap is here."""
        bwrap = shutil.which("bwrap")
        if bwrap is None:
            return self.command
        # The test's folder is under /tmp: put it back, read-only, over the fresh /tmp.
        here = str(self.project.parent)
        sandbox = [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
        sandbox += ["--tmpfs", "/tmp", "--ro-bind", here, here, "--die-with-parent", "--"]
        return [*sandbox, *self.command]

    def run(self, timeout: float) -> subprocess.CompletedProcess[str]:
        """Run it to the end (a Job, or a container that refuses to start)."""
        return subprocess.run(
            self.argv(),
            cwd=self.project,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def start(self) -> None:
        """Start it in the background."""
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                self.argv(), cwd=self.project, env=self.env, stdout=log, stderr=subprocess.STDOUT
            )

    def get(self, path: str) -> httpx.Response:
        """GET a path of the pod's server."""
        return httpx.get(f"http://127.0.0.1:{self.port}{path}", timeout=5)

    def wait_answer(self, path: str, timeout: float) -> httpx.Response:
        """The first answer to GET `path`, as a probe waits for it."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.process is not None and self.process.poll() is None, self.log.read_text()
            try:
                return self.get(path)
            except httpx.TransportError:
                time.sleep(0.2)
        raise AssertionError(f"{path} did not answer:\n{self.log.read_text()[-3000:]}")

    def terminate(self) -> None:
        """SIGTERM to the server itself (bubblewrap does not pass signals on)."""
        assert self.process is not None
        pid = self.process.pid
        while children := Path(f"/proc/{pid}/task/{pid}/children").read_text().split():
            pid = int(children[0])
        os.kill(pid, signal.SIGTERM)

    def stop(self) -> None:
        """Kill what is left of it."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=30)


@pytest.fixture
def secret() -> Iterator[dict[str, str]]:
    """The Secret's keys: an empty database, Redis under a prefix of its own, and the
    project's variable (`GREETING`, named in its .env.example)."""
    with fresh_database("runyard_k8s") as url:
        prefix = f"runyard-test-{uuid.uuid4().hex[:8]}:"
        try:
            yield {
                "DATABASE_URL": url,
                "REDIS_URL": REDIS_URL,
                "RUNYARD_REDIS_PREFIX": prefix,
                "GREETING": "hello from the Secret",
            }
        finally:
            delete_keys(REDIS_URL, prefix)


@pytest.mark.timeout(300)
def test_the_job_then_the_pods_as_the_kubelet_runs_them(
    tmp_path: Path, secret: dict[str, str]
) -> None:
    project = tmp_path / "template"
    shutil.copytree(TEMPLATE, project)
    (project / "data").mkdir()
    main(["k8s", "-c", str(project / "langgraph.json"), "-o", str(tmp_path / "k8s")])
    deployment = manifest(tmp_path / "k8s", "deployment.yaml")
    (server,) = deployment["spec"]["template"]["spec"]["containers"]
    (migrate,) = manifest(tmp_path / "k8s", "migrate-job.yaml")["spec"]["template"]["spec"][
        "containers"
    ]
    grace = deployment["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]

    # Before the Job: the instance refuses the database, in one line saying what to run.
    early = Pod(server, secret, project).run(timeout=120)
    assert early.returncode != 0
    assert "run `runyard migrate` first" in early.stdout + early.stderr

    job = Pod(migrate, secret, project).run(timeout=180)
    assert job.returncode == 0, job.stdout + job.stderr

    pod = Pod(server, secret, project)
    pod.start()
    try:
        probes = {
            name: server[name]["httpGet"]["path"] for name in server if name.endswith("Probe")
        }
        assert pod.wait_answer(probes["startupProbe"], timeout=120).status_code == 200
        assert pod.get(probes["readinessProbe"]).json()["status"] == "ok"
        assert pod.get(probes["livenessProbe"]).status_code == 200

        # A run: its steps signed with the pod's name, its greeting from the Secret.
        run = httpx.post(
            f"http://127.0.0.1:{pod.port}/runs/wait",
            json={"assistant_id": "agent", "input": {"steps": 2}},
            timeout=60,
        )
        assert run.status_code == 200, run.text
        assert run.json()["done"] == [f"0@{POD_NAME}", f"1@{POD_NAME}"]
        assert run.json()["greeting"] == "hello from the Secret"

        pod.terminate()
        assert pod.process is not None
        # The kubelet kills it after the grace period; it has nothing to drain. Once shut
        # down, uvicorn raises the signal again: the status is SIGTERM's, as a process (0 as
        # a container's first process, which ignores it).
        assert pod.process.wait(timeout=grace) in (0, -signal.SIGTERM, 128 + signal.SIGTERM)
    finally:
        pod.stop()
    log = pod.log.read_text()
    assert "worker_pool_stopped" in log and "Application shutdown complete" in log
    assert "Traceback" not in log
