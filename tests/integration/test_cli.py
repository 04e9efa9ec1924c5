"""The `runyard` command as a user runs it: real processes, real ports, real databases."""

from __future__ import annotations

import errno
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import httpx
import psycopg
import pytest
from sqlalchemy import create_engine, inspect

from runyard.db.tables import metadata
from runyard.settings import setting_names
from tests.support.databases import fresh_database
from tests.support.server import TEST_CONFIG, free_port

DEFAULT_DEV_PORT = 2024
SERVING = re.compile(r"serving on (http://127\.0\.0\.1:(\d+))")
# Settings a developer's shell might hold; every CLI run here starts without them.
SCRUBBED = set(setting_names())


class Cli:
    """Starts `python -m runyard.cli ...` processes and makes sure none outlives the test."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.processes: list[subprocess.Popen[bytes]] = []

    def env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        """The environment of a CLI process: no inherited settings, data under workdir."""
        env = {k: v for k, v in os.environ.items() if k not in SCRUBBED}
        env.update(PYTHONUNBUFFERED="1", RUNYARD_DATA_DIR=str(self.workdir / "data"))
        env.update(extra or {})
        return env

    def start(
        self, *args: str, env: dict[str, str] | None = None
    ) -> tuple[subprocess.Popen[bytes], Path]:
        """Start the command in the background; its output goes to a log file."""
        log = self.workdir / f"cli-{len(self.processes)}.log"
        with log.open("wb") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", "runyard.cli", *args],
                cwd=self.workdir,  # away from the repo, so a developer's .env does not apply
                env=self.env(env),
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.processes.append(proc)
        return proc, log

    def run(
        self, *args: str, env: dict[str, str] | None = None, timeout: float = 60
    ) -> tuple[int, str]:
        """Run the command to completion; return its exit code and combined output."""
        proc, log = self.start(*args, env=env)
        try:
            code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            pytest.fail(f"runyard {' '.join(args)} did not exit:\n{log.read_text()[-3000:]}")
        return code, log.read_text()

    def stop_all(self) -> None:
        """SIGTERM every process group still running, then SIGKILL the stubborn ones."""
        for proc in self.processes:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.processes:
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=5)


@pytest.fixture
def cli(tmp_path: Path) -> Iterator[Cli]:
    """A CLI runner whose processes are always stopped after the test."""
    runner = Cli(tmp_path)
    try:
        yield runner
    finally:
        runner.stop_all()


def port_is_busy(port: int) -> bool:
    """True when 127.0.0.1:port cannot be bound (the check `runyard dev` makes)."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError as exc:
            if exc.errno in (errno.EADDRINUSE, errno.EACCES):
                return True
            raise
    return False


def occupy(stack: ExitStack, port: int) -> None:
    """Listen on 127.0.0.1:port until the stack closes."""
    sock = stack.enter_context(socket.socket())
    sock.bind(("127.0.0.1", port))
    sock.listen()


def wait_for_url(proc: subprocess.Popen[bytes], log: Path, timeout: float = 60) -> tuple[str, int]:
    """The URL the server prints, once /ok answers there."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        output = log.read_text()
        if proc.poll() is not None:
            pytest.fail(f"server exited with {proc.returncode}:\n{output[-3000:]}")
        match = SERVING.search(output)
        if match:
            url, port = match.group(1), int(match.group(2))
            try:
                if httpx.get(f"{url}/ok", timeout=1).json() == {"ok": True}:
                    return url, port
            except httpx.HTTPError:
                pass
        time.sleep(0.1)
    pytest.fail(f"server never answered at its printed URL:\n{log.read_text()[-3000:]}")


def wait_for_exit(proc: subprocess.Popen[bytes], log: Path, timeout: float = 60) -> tuple[int, str]:
    """Exit code and output of a process that is expected to stop by itself."""
    try:
        code = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        pytest.fail(f"process did not exit:\n{log.read_text()[-3000:]}")
    return code, log.read_text()


@pytest.fixture
def postgres_url() -> Iterator[str]:
    """A fresh, empty PostgreSQL database, dropped afterwards."""
    with fresh_database("runyard_cli") as url:
        yield url


def head_revisions() -> set[str]:
    """The newest migration ids shipped with the code."""
    from alembic.script import ScriptDirectory

    from runyard.db.schema import alembic_config

    return set(ScriptDirectory.from_config(alembic_config()).get_heads())


def postgres_tables(url: str) -> set[str]:
    """Table names in the public schema of the database at url."""
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'"
        ).fetchall()
    return {row[0] for row in rows}


# --- runyard dev: ports -------------------------------------------------------------------


def test_dev_moves_off_a_busy_default_port_and_prints_the_url(cli: Cli) -> None:
    with ExitStack() as stack:
        # 2024 may be held by another service or be free; make sure it is busy either way,
        # and the next free one too, so the server has to look further than port + 1.
        if not port_is_busy(DEFAULT_DEV_PORT):
            occupy(stack, DEFAULT_DEV_PORT)
        taken = next(
            p for p in range(DEFAULT_DEV_PORT + 1, DEFAULT_DEV_PORT + 50) if not port_is_busy(p)
        )
        occupy(stack, taken)

        proc, log = cli.start("dev", "--no-reload", "--config", str(TEST_CONFIG))
        url, port = wait_for_url(proc, log)

    output = log.read_text()
    assert port > taken
    assert url == f"http://127.0.0.1:{port}"
    assert f"port {DEFAULT_DEV_PORT} is in use, using {port} instead" in output
    info = httpx.get(f"{url}/info", timeout=5).json()
    assert info["runyard"]["database"] == "sqlite"
    assert set(info["graphs"]) >= {"agent", "pipeline", "approval"}


def test_dev_serves_where_it_says(cli: Cli) -> None:
    # Whatever 2024's state, the printed URL is the one that answers.
    proc, log = cli.start("dev", "--no-reload", "--config", str(TEST_CONFIG))
    url, port = wait_for_url(proc, log)
    if port_is_busy(DEFAULT_DEV_PORT) and port != DEFAULT_DEV_PORT:
        assert f"port {DEFAULT_DEV_PORT} is in use" in log.read_text()
    assert httpx.get(f"{url}/ok", timeout=5).json() == {"ok": True}
    # SIGTERM stops it cleanly (uvicorn re-raises the signal once shut down).
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=20) in (0, -signal.SIGTERM)
    assert "Traceback" not in log.read_text()


@pytest.mark.parametrize("mode", ["dev", "serve"])
def test_explicit_busy_port_fails_clearly(cli: Cli, mode: str) -> None:
    with ExitStack() as stack:
        port = free_port()
        occupy(stack, port)
        args = [mode, "--port", str(port), "--config", str(TEST_CONFIG)]
        if mode == "dev":
            args.append("--no-reload")
        code, output = cli.run(*args, timeout=30)
    assert code != 0
    assert f"port {port}" in output
    assert "already in use" in output
    assert "--port" in output
    assert "Traceback" not in output


# --- start-up failures --------------------------------------------------------------------


def test_broken_graph_fails_start_up_naming_the_file(cli: Cli, tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    broken = project / "broken.py"
    broken.write_text("raise RuntimeError('missing API key for the model')\n")
    (project / "langgraph.json").write_text('{"graphs": {"bad": "./broken.py:graph"}}')
    proc, log = cli.start(
        "dev",
        "--no-reload",
        "--port",
        str(free_port()),
        "--config",
        str(project / "langgraph.json"),
    )
    code, output = wait_for_exit(proc, log)
    assert code != 0
    assert str(broken.resolve()) in output
    assert "missing API key for the model" in output
    assert "Application startup complete" not in output


def test_missing_config_file_fails_naming_it(cli: Cli, tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / "langgraph.json"
    proc, log = cli.start(
        "dev", "--no-reload", "--port", str(free_port()), "--config", str(missing)
    )
    code, output = wait_for_exit(proc, log)
    assert code != 0
    assert str(missing) in output
    assert "Traceback" not in output


@pytest.mark.parametrize("command", ["dev", "serve"])
def test_missing_graph_file_fails_in_one_line_without_traceback(
    cli: Cli, tmp_path: Path, command: str
) -> None:
    (tmp_path / "langgraph.json").write_text('{"graphs": {"agent": "./agent.py:graph"}}')
    args = [command, "--port", str(free_port()), "--config", str(tmp_path / "langgraph.json")]
    args.insert(1, "--no-reload" if command == "dev" else "--sqlite")
    proc, log = cli.start(*args)
    code, output = wait_for_exit(proc, log)
    assert code != 0
    failures = [line for line in output.splitlines() if "startup_failed" in line]
    assert len(failures) == 1, output
    assert f"graph 'agent': file {(tmp_path / 'agent.py').resolve()} does not exist" in failures[0]
    assert "Traceback" not in output
    assert "Application startup complete" not in output


@pytest.mark.parametrize("command", ["migrate", "serve"])
def test_bad_database_url_is_reported_without_traceback(cli: Cli, command: str) -> None:
    args = [command] if command == "migrate" else [command, "--port", str(free_port())]
    code, output = cli.run(*args, env={"DATABASE_URL": "mysql://root@localhost/runyard"})
    assert code != 0
    assert "DATABASE_URL" in output
    assert "invalid settings" in output
    assert "Traceback" not in output


def test_inconsistent_timings_are_reported_naming_both_settings(cli: Cli) -> None:
    env = {"HEARTBEAT_INTERVAL_SECONDS": "20", "LEASE_DURATION_SECONDS": "30"}
    code, output = cli.run("serve", "--port", str(free_port()), env=env)
    assert code != 0
    assert "HEARTBEAT_INTERVAL_SECONDS" in output
    assert "LEASE_DURATION_SECONDS" in output
    assert "Traceback" not in output


def test_no_command_prints_help(cli: Cli) -> None:
    code, output = cli.run()
    assert code == 2
    for command in ("dev", "serve", "migrate"):
        assert command in output


@pytest.mark.postgres
def test_no_migrate_on_an_empty_database_fails_saying_what_to_run(
    cli: Cli, postgres_url: str
) -> None:
    args = ["serve", "--no-migrate", "--port", str(free_port()), "--config", str(TEST_CONFIG)]
    code, output = cli.run(*args, env={"DATABASE_URL": postgres_url})
    assert code != 0
    assert "without Runyard's tables" in output
    assert "runyard migrate" in output
    assert "does not exist" not in output
    assert "Traceback" not in output
    assert "Application startup complete" not in output


# --- runyard migrate ----------------------------------------------------------------------


@pytest.mark.postgres
def test_migrate_builds_a_fresh_postgres_database(cli: Cli, postgres_url: str) -> None:
    assert postgres_tables(postgres_url) == set()
    code, output = cli.run("migrate", env={"DATABASE_URL": postgres_url})
    assert code == 0, output
    assert "newest migration" in output
    tables = postgres_tables(postgres_url)
    assert set(metadata.tables) <= tables
    with psycopg.connect(postgres_url) as conn:
        versions = {row[0] for row in conn.execute("SELECT version_num FROM alembic_version")}
    assert versions == head_revisions()
    # Running it again changes nothing and succeeds.
    code, output = cli.run("migrate", env={"DATABASE_URL": postgres_url})
    assert code == 0, output
    assert postgres_tables(postgres_url) == tables


def test_migrate_builds_a_sqlite_database(cli: Cli, tmp_path: Path) -> None:
    db = tmp_path / "nested" / "runyard.sqlite"
    code, output = cli.run("migrate", env={"DATABASE_URL": f"sqlite+aiosqlite:///{db}"})
    assert code == 0, output
    engine = create_engine(f"sqlite:///{db}")
    try:
        assert set(metadata.tables) <= set(inspect(engine).get_table_names())
    finally:
        engine.dispose()


def test_migrate_cannot_reach_the_database_exits_non_zero(cli: Cli) -> None:
    url = f"postgresql://nobody@127.0.0.1:{free_port()}/runyard"
    code, output = cli.run("migrate", env={"DATABASE_URL": url}, timeout=60)
    assert code != 0
    assert output.strip()


@pytest.mark.postgres
@pytest.mark.parametrize("command", ["serve", "migrate"])
def test_a_database_that_does_not_exist_is_one_line_saying_how_to_create_it(
    cli: Cli, command: str
) -> None:
    name = f"runyard_missing_{os.getpid()}"
    url = f"postgresql://postgres@127.0.0.1:5432/{name}"
    args = [command]
    if command == "serve":
        args += ["--port", str(free_port()), "--config", str(TEST_CONFIG)]
    code, output = cli.run(*args, env={"DATABASE_URL": url})
    assert code != 0, output
    lines = [line for line in output.splitlines() if "does not exist" in line]
    assert len(lines) == 1, output
    assert name in lines[0]
    assert "CREATE DATABASE" in lines[0]
    assert "Traceback" not in output
