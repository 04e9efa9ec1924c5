"""`runyard build` of a user's project, run as two containers behind nginx, driven by the SDK.

Everything is real: a private dockerd (no bridge, host networking only), an image built on
the debootstrapped Debian base of `runyard base-images --base-only` (no registry is
reachable), the machine's PostgreSQL (a
throwaway database) and Redis (a key prefix of its own), Debian's nginx on loopback.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from langgraph_sdk import get_client
from langgraph_sdk.client import LangGraphClient

from runyard.deploy.compose import render_nginx_conf
from tests.support.databases import fresh_database
from tests.support.docker import (
    DockerDaemon,
    DockerUnavailable,
    cached_data_root,
    debian_images,
)
from tests.support.redis_keys import delete_keys
from tests.support.runs import wait_for_end, wait_for_values
from tests.support.server import ROOT, free_port

PROJECT = ROOT / "tests" / "projects" / "deployed" / "langgraph.json"
TAG = "runyard-deployed:test"
SHARED_REDIS = "redis://127.0.0.1:6379/0"

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]


@dataclass
class Deployment:
    """Two containers of the project's image and nginx in front of them."""

    daemon: DockerDaemon
    url: str
    ports: dict[str, int]

    def container(self, name: str) -> str:
        """The container name of instance `name` ('a' or 'b')."""
        return f"runyard-test-{name}"


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DockerDaemon]:
    """A private dockerd, or a skip that says why not."""
    with cached_data_root() as data_root:
        started = DockerDaemon(tmp_path_factory.mktemp("dockerd"), data_root=data_root)
        try:
            started.start()
        except DockerUnavailable as exc:
            started.stop()
            print(f"\nSKIPPED the project image test: {exc}")
            pytest.skip(f"the project image test needs a container engine: {exc}")
        try:
            yield started
        finally:
            started.stop()


@pytest.fixture(scope="module")
def base_image_flags(daemon: DockerDaemon) -> list[str]:
    """The `runyard build` flags of the base image `runyard base-images --base-only` made,
    as the offline recipe in docs/deploying.md says, or a skip that says why it could not."""
    began = time.monotonic()
    try:
        flags = debian_images(daemon, base_only=True)
    except DockerUnavailable as exc:
        print(f"\nSKIPPED the project image test: {exc}")
        pytest.skip(f"the project image test needs a base image: {exc}")
    print(f"\nbase image ready in {time.monotonic() - began:.1f}s")
    return flags


@pytest.fixture(scope="module")
def image(
    daemon: DockerDaemon, base_image_flags: list[str], tmp_path_factory: pytest.TempPathFactory
) -> str:
    """The project's image, built by `runyard build` as a user runs it."""
    workdir = tmp_path_factory.mktemp("build")
    env = {**os.environ, "DOCKER_HOST": f"unix://{daemon.socket}"}
    env["PATH"] = f"{Path(daemon.client).parent}:{env.get('PATH', '')}"
    command = [sys.executable, "-m", "runyard.cli", "build", "--config", str(PROJECT)]
    command += [*base_image_flags, "--tag", TAG]
    began = time.monotonic()
    result = subprocess.run(
        command, cwd=workdir, env=env, capture_output=True, timeout=900, check=False
    )
    output = (result.stdout + result.stderr).decode(errors="replace")
    assert result.returncode == 0, output[-5000:]
    cached = output.count("Using cache")
    print(f"\nimage built in {time.monotonic() - began:.1f}s ({cached} cached steps)")
    return TAG


@pytest.fixture(scope="module")
def nginx_binary() -> str:
    """Debian's nginx, or a skip that says how to get it."""
    found = shutil.which("nginx") or (
        "/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None
    )
    if found is None:
        pytest.skip("nginx is not installed (apt-get install nginx)")
    return found


@pytest.fixture
def deployment(
    daemon: DockerDaemon, image: str, nginx_binary: str, tmp_path: Path
) -> Iterator[Deployment]:
    """Migrate a throwaway database, start instances a and b and nginx; remove them after."""
    prefix = f"image-{uuid.uuid4().hex[:12]}:"
    ports = {"a": free_port(), "b": free_port()}
    with fresh_database("runyard_image") as database_url:
        daemon.run(
            "run",
            "--rm",
            "--network",
            "host",
            "-e",
            f"DATABASE_URL={database_url}",
            image,
            "runyard",
            "migrate",
        )
        for name, port in ports.items():
            daemon.run(
                "run",
                "-d",
                "--name",
                f"runyard-test-{name}",
                "--network",
                "host",
                "-e",
                f"DATABASE_URL={database_url}",
                "-e",
                f"REDIS_URL={SHARED_REDIS}",
                "-e",
                f"RUNYARD_REDIS_PREFIX={prefix}",
                "-e",
                f"INSTANCE_NAME={name}",
                image,
                "runyard",
                "serve",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--no-migrate",
            )
        nginx = None
        try:
            for name, port in ports.items():
                wait_for_ok(daemon, f"runyard-test-{name}", f"http://127.0.0.1:{port}")
            lb_port = free_port()
            conf = tmp_path / "nginx.conf"
            conf.write_text(
                render_nginx_conf(
                    list(ports.values()),
                    f"127.0.0.1:{lb_port}",
                    extra_main=f"pid {tmp_path}/nginx.pid;\nerror_log {tmp_path}/error.log;\n",
                )
            )
            nginx = subprocess.Popen(
                [nginx_binary, "-p", str(tmp_path), "-c", str(conf), "-g", "daemon off;"],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.STDOUT,
            )
            url = f"http://127.0.0.1:{lb_port}"
            wait_for_ok(daemon, "runyard-test-a", url)
            yield Deployment(daemon, url, ports)
        finally:
            if nginx is not None:
                nginx.terminate()
                nginx.wait(timeout=10)
            for name in ports:
                subprocess.run(
                    daemon.command("rm", "-f", f"runyard-test-{name}"),
                    capture_output=True,
                    timeout=60,
                    check=False,
                )
            delete_keys(SHARED_REDIS, prefix)


def wait_for_ok(daemon: DockerDaemon, container: str, url: str, timeout: float = 90) -> None:
    """Wait until `url/ok` answers; fail with the container's log if it never does."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/ok", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    logs = subprocess.run(daemon.command("logs", container), capture_output=True, check=False)
    pytest.fail(
        f"{url} never answered; {container} says:\n{logs.stdout[-3000:]!r}{logs.stderr[-3000:]!r}"
    )


@pytest.fixture
async def client(deployment: Deployment) -> AsyncIterator[LangGraphClient]:
    """A langgraph-sdk client talking to nginx."""
    lg = get_client(url=deployment.url, api_key=None)
    try:
        yield lg
    finally:
        await lg.http.client.aclose()


async def test_project_image_serves_its_graph_behind_nginx(
    client: LangGraphClient, deployment: Deployment
) -> None:
    # A run: the project's `app` package, its pip dependency (inflection), the image's
    # dockerfile_lines (the prefix) and langgraph.json's env (the suffix) all took effect.
    result = await client.runs.wait(None, "steps", input={"word": "hello_world", "steps": 2})
    assert isinstance(result, dict)
    assert result["title"] == ">> Hello World <<"
    assert set(result["done"]) <= {"a", "b"} and len(result["done"]) == 2

    # A stream, interrupted after its first update and joined again with Last-Event-ID:
    # the missed events arrive once each, in order, like a full replay.
    thread_id = (await client.threads.create())["thread_id"]
    stream = client.runs.stream(
        thread_id,
        "steps",
        input={"word": "x", "steps": 4, "delay": 0.3},
        stream_mode="updates",
        stream_resumable=True,
        on_disconnect="continue",
    )
    first = []
    async for part in stream:
        first.append(part)
        if len(first) == 2:
            break
    await stream.aclose()
    run_id = first[0].data["run_id"]
    assert first[1].event == "updates" and first[1].id
    resumed = [
        p async for p in client.runs.join_stream(thread_id, run_id, last_event_id=first[1].id)
    ]
    replay = [p async for p in client.runs.join_stream(thread_id, run_id, last_event_id="0")]
    seen = [(p.event, p.data) for p in first + resumed]
    assert seen == [(p.event, p.data) for p in replay]
    updates = [next(iter(p.data)) for p in replay if p.event == "updates"]
    assert updates == ["step"] * 4 + ["finish"]


async def test_sigterm_hands_a_run_over_to_the_other_container(
    client: LangGraphClient, deployment: Deployment
) -> None:
    # Default settings (lease 8 s, drain 30 s): the run outlasts the drain, so the stopping
    # container keeps executing it for 30 s while holding its lease, then hands it over.
    thread_id = (await client.threads.create())["thread_id"]
    steps = 40
    run = await client.runs.create(
        thread_id, "steps", input={"word": "handed over", "steps": steps, "delay": 1.0}
    )
    values = await wait_for_values(client, thread_id, lambda v: len(v.get("done", [])) >= 1)
    first = values["done"][0]
    other = "b" if first == "a" else "a"
    deployment.daemon.run("kill", "--signal", "TERM", deployment.container(first))

    status = await wait_for_end(client, thread_id, run["run_id"])
    assert status == "success"
    final = (await client.threads.get_state(thread_id))["values"]
    # Resumed from its last checkpoint on the other container: the steps done before the
    # SIGTERM are kept, the rest are the survivor's, none is missing or repeated.
    assert len(final["done"]) == steps
    assert final["done"][0] == first and final["done"][-1] == other
    assert final["title"] == ">> Handed Over <<"
    exited = deployment.daemon.run("wait", deployment.container(first), timeout=60)
    assert exited.stdout.decode().strip() == "0"
