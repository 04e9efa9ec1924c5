"""`runyard dev` keeps a project's data beside its langgraph.json and reloads on that
project's files only: not on the working directory, virtual environments or caches."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.integration.test_cli import SCRUBBED
from tests.integration.test_startup_hangs import GRAPH
from tests.support.server import free_port

pytestmark = pytest.mark.timeout(90)


def project(root: Path, name: str) -> Path:
    """A one-graph project folder; its langgraph.json."""
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "agent.py").write_text(GRAPH)
    (folder / "langgraph.json").write_text('{"graphs": {"agent": "./agent.py:graph"}}')
    return folder / "langgraph.json"


class Dev:
    """`runyard dev` processes started from one working directory, with no RUNYARD_DATA_DIR."""

    def __init__(self, cwd: Path) -> None:
        self.cwd = cwd
        self.started: list[tuple[subprocess.Popen[bytes], Path]] = []

    def start(self, config: Path, *flags: str) -> tuple[str, Path]:
        port = free_port()
        log = self.cwd / f"dev-{port}.log"
        env = {k: v for k, v in os.environ.items() if k not in SCRUBBED}
        args = ["dev", "--port", str(port), "--config", str(config), *flags]
        with log.open("wb") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", "runyard.cli", *args],
                cwd=self.cwd,
                env={**env, "PYTHONUNBUFFERED": "1"},
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.started.append((proc, log))
        self.wait_serving(log, 1)
        return f"http://127.0.0.1:{port}", log

    @staticmethod
    def wait_serving(log: Path, times: int, timeout: float = 40) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if log.read_text().count("serving on") >= times:
                return
            time.sleep(0.1)
        pytest.fail(f"not serving ({times}):\n{log.read_text()[-3000:]}")

    def stop(self) -> None:
        for proc, _ in self.started:
            if proc.poll() is None:
                os.killpg(proc.pid, 15)
        for proc, _ in self.started:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, 9)
                proc.wait(timeout=10)


@pytest.fixture
def dev(tmp_path: Path) -> Iterator[Dev]:
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    runner = Dev(cwd)
    try:
        yield runner
    finally:
        runner.stop()


def test_two_projects_from_one_working_directory_keep_their_own_data(
    dev: Dev, tmp_path: Path
) -> None:
    first, second = project(tmp_path, "first"), project(tmp_path, "second")
    url_a, _ = dev.start(first, "--no-reload")
    url_b, _ = dev.start(second, "--no-reload")
    thread = httpx.post(f"{url_a}/threads", json={"metadata": {"of": "first"}}).json()
    assert httpx.get(f"{url_b}/threads/{thread['thread_id']}").status_code == 404
    assert (first.parent / ".runyard" / "runyard.sqlite").is_file()
    assert (second.parent / ".runyard" / "runyard.sqlite").is_file()
    assert not (dev.cwd / ".runyard").exists()


def test_reload_watches_the_projects_folder_but_not_its_venv_or_caches(
    dev: Dev, tmp_path: Path
) -> None:
    config = project(tmp_path, "agent")
    _, log = dev.start(config)
    folder = config.parent
    for noise in (
        ".venv/lib/python3.11/site-packages/pkg/__init__.py",
        "__pycache__/agent.py",
        dev.cwd.relative_to(folder.parent).as_posix() + "/elsewhere.py",
    ):
        target = (folder / noise) if not noise.startswith("cwd/") else tmp_path / noise
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text("x = 1\n")
    time.sleep(3)
    assert log.read_text().count("serving on") == 1, log.read_text()[-3000:]
    (folder / "agent.py").write_text(GRAPH + "\n# edited\n")
    dev.wait_serving(log, 2)
