"""A wheel of Runyard, installed into a fresh venv outside the source tree, migrates and serves."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import psycopg
import pytest

from runyard.settings import Settings
from tests.support.databases import fresh_database
from tests.support.server import ROOT, free_port

OWN_APP = ROOT / "tests" / "projects" / "own_app"
MIGRATIONS = {
    "runyard/migrations/env.py",
    "runyard/migrations/script.py.mako",
    "runyard/migrations/versions/0001_create_assistants_threads_and_runs.py",
}
# Settings a developer's shell might hold; the installed commands run without them.
SCRUBBED = {str(f.alias) for f in Settings.model_fields.values() if f.alias} | {"PYTHONPATH"}

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


def run(args: list[str | Path], cwd: Path, env: dict[str, str] | None = None) -> str:
    """Run a command to completion; fail the test with its output if it fails."""
    result = subprocess.run(
        [str(a) for a in args], cwd=cwd, env=env, capture_output=True, timeout=400, check=False
    )
    output = (result.stdout + result.stderr).decode(errors="replace")
    if result.returncode != 0:
        pytest.fail(f"{' '.join(map(str, args))} failed ({result.returncode}):\n{output[-4000:]}")
    return output


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path]]:
    """(venv, work folder): a wheel built by pip from the checkout, installed into a fresh
    venv; the work folder is outside the source tree."""
    work = tmp_path_factory.mktemp("wheel")
    dist = work / "dist"
    # The dev extras hold the build backend: no isolated build environment to download.
    wheel_command = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation"]
    run([*wheel_command, "-w", dist, ROOT], cwd=work)
    (wheel,) = dist.glob("runyard-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        assert MIGRATIONS <= set(archive.namelist())
    venv = work / "venv"
    run([sys.executable, "-m", "venv", venv], cwd=work)
    began = time.monotonic()
    run([venv / "bin" / "python", "-m", "pip", "install", "-q", wheel], cwd=work)
    print(f"\nwheel installed into a fresh venv in {time.monotonic() - began:.1f}s")
    yield venv, work


def clean_env(**extra: str) -> dict[str, str]:
    """The environment of an installed command: no inherited Runyard settings."""
    env = {k: v for k, v in os.environ.items() if k not in SCRUBBED}
    env.update(PYTHONUNBUFFERED="1", **extra)
    return env


def test_the_installed_package_is_the_wheel_not_the_checkout(installed: tuple[Path, Path]) -> None:
    venv, work = installed
    where = run([venv / "bin" / "python", "-c", "import runyard; print(runyard.__file__)"], work)
    assert where.strip().startswith(str(venv))


def test_wheel_migrates_an_empty_database_and_serves_a_project(
    installed: tuple[Path, Path],
) -> None:
    venv, work = installed
    project = work / "project"
    shutil.copytree(OWN_APP, project, ignore=shutil.ignore_patterns("__pycache__"))
    with fresh_database("runyard_wheel") as url:
        output = run([venv / "bin" / "runyard", "migrate"], work, clean_env(DATABASE_URL=url))
        assert "database is at the newest migration" in output
        with psycopg.connect(url) as conn:
            tables = {
                row[0]
                for row in conn.execute(
                    "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'"
                )
            }
        assert {"assistants", "threads", "runs", "alembic_version"} <= tables

        port = free_port()
        log = work / "serve.log"
        with log.open("wb") as out:
            server = subprocess.Popen(
                [venv / "bin" / "runyard", "serve", "--port", str(port), "--no-migrate"],
                cwd=project,  # the project's langgraph.json, found where the user stands
                env=clean_env(DATABASE_URL=url, RUNYARD_DATA_DIR=str(work / "data")),
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        try:
            base = f"http://127.0.0.1:{port}"
            wait_for_ok(server, base, log)
            answer = httpx.post(
                f"{base}/runs/wait",
                json={"assistant_id": "shouter", "input": {"text": "from a wheel"}},
                timeout=30,
            )
            assert answer.status_code == 200, answer.text
            assert answer.json() == {"text": "FROM A WHEEL! (from app)", "module": "app.graph"}
        finally:
            server.terminate()
            server.wait(timeout=30)


def test_an_installed_runyard_writes_a_dockerfile_and_its_own_wheel(
    installed: tuple[Path, Path],
) -> None:
    venv, work = installed
    project = work / "dockerfile-project"
    shutil.copytree(OWN_APP, project, ignore=shutil.ignore_patterns("__pycache__"))
    output = run([venv / "bin" / "runyard", "dockerfile", "Dockerfile"], project, clean_env())
    assert "wrote" in output
    dockerfile = (project / "Dockerfile").read_text()
    assert "ARG BASE_IMAGE=python:3.11-slim" in dockerfile
    (wheel,) = (project / ".runyard-dist").glob("runyard-*.whl")
    assert f"COPY .runyard-dist/{wheel.name} " in dockerfile
    # Packed from the installed (not editable) Runyard: the same files, migrations included,
    # and an installable wheel with the console script.
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        assert MIGRATIONS <= names
        entry_points = archive.read(f"{wheel.name.split('-py3')[0]}.dist-info/entry_points.txt")
    assert b"runyard = runyard.cli:main" in entry_points


def wait_for_ok(server: subprocess.Popen[bytes], base: str, log: Path) -> None:
    """Wait until the server answers /ok; fail with its log if it exits or never answers."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if server.poll() is not None:
            pytest.fail(f"runyard serve exited:\n{log.read_text()[-3000:]}")
        try:
            if httpx.get(f"{base}/ok", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    pytest.fail(f"runyard serve never answered:\n{log.read_text()[-3000:]}")
