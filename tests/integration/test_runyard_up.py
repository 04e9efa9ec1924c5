"""`runyard up --network host --instances 3` of a project shaped like LangGraph's templates
(no `.env`, though langgraph.json names one), driven through nginx with the SDK, then
`runyard down`.

Everything is real: a private dockerd (no bridge, host networking only), Debian's docker-
compose, and the images of the offline recipe (docs/deploying.md): `runyard base-images`
makes a debootstrapped base and PostgreSQL, Redis and nginx images from Debian's packages
(no registry is reachable), and `runyard up` builds the project's image on that base; they
stay in the cached daemon data root, so later runs are warm.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from langgraph_sdk import get_client
from langgraph_sdk.client import LangGraphClient

from runyard.deploy.stack import project_name
from tests.support.docker import (
    DockerDaemon,
    DockerUnavailable,
    cached_data_root,
    debian_images,
)
from tests.support.runs import wait_for_end, wait_for_values
from tests.support.server import ROOT, free_port

TEMPLATE = ROOT / "tests" / "projects" / "deployable"
TAG = "runyard-template:test"

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]


@dataclass
class Up:
    """A running `runyard up` deployment and how to reach and drive it."""

    daemon: DockerDaemon
    project: Path
    folder: Path
    url: str
    env: dict[str, str]
    # The options of `runyard up` that say where everything listens and which images run.
    options: list[str]

    def runyard(self, *args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
        """A `runyard` command run as a user runs it, against the private daemon; its
        output (stdout and stderr) with each line's time since the start."""
        command = [sys.executable, "-m", "runyard.cli", *args]
        command += ["-c", str(self.project / "langgraph.json"), "--dir", str(self.folder)]
        began = time.monotonic()
        lines = []
        with subprocess.Popen(
            command, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        ) as process:
            assert process.stdout is not None
            for line in process.stdout:
                lines.append(f"[{time.monotonic() - began:6.1f}s] {line}")
            returncode = process.wait(timeout=timeout)
        return subprocess.CompletedProcess(command, returncode, "".join(lines), "")

    def container(self, service: str) -> str:
        """The container id of a compose service."""
        compose = shutil.which("docker-compose", path=self.env["PATH"]) or "docker-compose"
        command = [compose, "-p", project_name(self.project.name)]
        command += ["-f", str(self.folder / "docker-compose.yml"), "ps", "-q", service]
        result = subprocess.run(
            command, env=self.env, capture_output=True, text=True, timeout=60, check=True
        )
        return result.stdout.strip()


@pytest.fixture(scope="module")
def daemon(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[DockerDaemon, list[str]]]:
    """A private dockerd with the base and service images `runyard base-images` made (the
    offline recipe in docs/deploying.md) and the `runyard up` flags that use them, or a skip
    that says why not."""
    if shutil.which("docker-compose") is None:
        pytest.skip("docker-compose is not installed (apt-get install docker-compose)")
    # Another test run's daemon may hold the cached data root: wait for it rather than
    # build every image again from scratch.
    with cached_data_root(wait=900) as data_root:
        started = DockerDaemon(tmp_path_factory.mktemp("dockerd"), data_root=data_root)
        try:
            started.start()
            began = time.monotonic()
            images = debian_images(started)
            print(f"\nbase and service images ready in {time.monotonic() - began:.1f}s")
        except DockerUnavailable as exc:
            started.stop()
            pytest.skip(f"`runyard up` needs a container engine: {exc}")
        try:
            yield started, images
        finally:
            started.stop()


@pytest.fixture(scope="module")
def up(
    daemon: tuple[DockerDaemon, list[str]], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Up]:
    """`runyard up --network host --instances 3` of a copy of the template project, with no
    `.env` (LangGraph's templates ship none, though their langgraph.json names one)."""
    docker, images = daemon
    project = tmp_path_factory.mktemp("projects") / "template"
    shutil.copytree(TEMPLATE, project)
    assert not (project / ".env").exists()
    port = consecutive_free_ports(4)
    env = {**os.environ, "DOCKER_HOST": f"unix://{docker.socket}"}
    env["PATH"] = f"{Path(docker.client).parent}:{env.get('PATH', '')}"
    options = [
        "--network",
        "host",
        "--instances",
        "3",
        "--port",
        str(port),
        "--postgres-port",
        str(free_port()),
        "--redis-port",
        str(free_port()),
        *images,
        "--tag",
        TAG,
    ]
    folder = tmp_path_factory.mktemp("up")
    deployment = Up(docker, project, folder, f"http://127.0.0.1:{port}", env, options)
    # Torn down even when `up` fails: its volumes must not outlive this run (the daemon's
    # start removes what a killed run left, see DockerDaemon.remove_leftovers).
    try:
        began = time.monotonic()
        result = deployment.runyard("up", *options)
        output = result.stdout + result.stderr
        assert result.returncode == 0, output[-6000:]
        steps = output.count("Using cache"), output.count(" ---> ")
        print(f"\nrunyard up took {time.monotonic() - began:.1f}s ({steps[0]} cached build steps):")
        print("".join(line for line in output.splitlines(True) if "] runyard: " in line))
        assert f"3 instance(s) answer through nginx on {deployment.url}" in output
        # Started without the missing env file, saying so, never with Compose's error.
        assert f'{(project / ".env").resolve()} ("env" in langgraph.json) does not exist' in output
        assert "Couldn't find env file" not in output
        yield deployment
    finally:
        deployment.runyard("down", "--volumes", timeout=300)


def consecutive_free_ports(count: int) -> int:
    """The first of `count` consecutive ports nobody listens on."""
    for _ in range(50):
        first = free_port()
        if first + count < 65535 and all(port_free(first + i) for i in range(count)):
            return first
    raise AssertionError(f"no {count} consecutive free ports")


def port_free(port: int) -> bool:
    """True when nothing listens on 127.0.0.1:port."""
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


@pytest.fixture
async def client(up: Up) -> AsyncIterator[LangGraphClient]:
    """A langgraph-sdk client talking to nginx."""
    lg = get_client(url=up.url, api_key=None)
    try:
        yield lg
    finally:
        await lg.http.client.aclose()


async def test_runyard_up_serves_a_template_project_through_nginx(
    client: LangGraphClient, up: Up
) -> None:
    # A streamed run: every step, then the greeting, empty: there is no .env yet.
    thread_id = (await client.threads.create())["thread_id"]
    parts = [
        part
        async for part in client.runs.stream(
            thread_id, "agent", input={"steps": 3}, stream_mode="updates"
        )
    ]
    updates = [part.data for part in parts if part.event == "updates"]
    assert [next(iter(u)) for u in updates] == ["step"] * 3 + ["finish"]
    assert updates[-1] == {"finish": {"greeting": ""}}

    # /wait stops at the interrupt; resuming it with a command finishes it.
    thread_id = (await client.threads.create())["thread_id"]
    paused = await client.runs.wait(thread_id, "asker", input={"question": "Deploy?"})
    assert isinstance(paused, dict)
    assert [i["value"] for i in paused["__interrupt__"]] == ["Deploy?"]
    resumed = await client.runs.wait(thread_id, "asker", command={"resume": "yes"})
    assert resumed == {"question": "Deploy?", "answer": "yes"}

    # A run longer than the lease (8 s) and the drain (30 s), with the default settings: the
    # instance executing it is stopped (SIGTERM, then it drains); the run finishes on
    # another one, every step done once, and the stopped instance exits cleanly.
    thread_id = (await client.threads.create())["thread_id"]
    steps = 40
    run = await client.runs.create(thread_id, "agent", input={"steps": steps, "delay": 1.0})
    started = await wait_for_values(client, thread_id, lambda v: len(v.get("done", [])) >= 1)
    first = started["done"][0].split("@")[1]
    container = up.container(first)
    await asyncio.to_thread(up.daemon.run, "stop", container, timeout=120)
    assert await wait_for_end(client, thread_id, run["run_id"]) == "success"
    done = (await client.threads.get_state(thread_id))["values"]["done"]
    assert [entry.split("@")[0] for entry in done] == [str(i) for i in range(steps)]
    executors = [entry.split("@")[1] for entry in done]
    assert executors[0] == first and executors[-1] != first
    assert set(executors) <= {"runyard-1", "runyard-2", "runyard-3"}
    exited = up.daemon.run("inspect", "-f", "{{.State.ExitCode}}", container)
    assert exited.stdout.decode().strip() == "0"

    # The user adds the .env the template names, with a setting an instance cannot start
    # with: the next `up` hands it to the instances, and fails naming them, with their last
    # log lines.
    shutil.copyfile(up.project / ".env.example", up.project / ".env")
    with (up.project / ".env").open("a") as env:
        env.write("LEASE_DURATION_SECONDS=not-a-number\n")
    failed = up.runyard("up", *up.options, "--no-build", "--wait-timeout", "300")
    output = failed.stdout + failed.stderr
    assert failed.returncode != 0
    assert "exited or keeps restarting" in output  # at once, not after the timeout
    assert "last log lines of runyard-" in output
    assert "lease_duration_seconds" in output.lower(), output[-3000:]

    # down: the containers go, the volumes stay, and it says so.
    down = up.runyard("down", timeout=300)
    assert down.returncode == 0, down.stdout + down.stderr
    assert f"kept the volumes {project_name(up.project.name)}_postgres-data" in down.stdout
    assert up.container("lb") == ""
