"""`runyard migrate --to/--status`, and what an instance does on a schema older or newer
than its code, as an operator sees it: real processes on real databases.

A newer release's schema is made here as that release leaves it: a revision this code does
not know in alembic_version, and its row in schema_compatibility saying which code serves on
it. (tests/integration/test_side_by_side.py runs a real older release on a real newer schema.)
"""

from __future__ import annotations

import sqlite3
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import psycopg
import pytest

from runyard.db.engine import SCHEMA_REVISION
from runyard.db.schema import known_revisions
from tests.integration.test_cli import Cli, wait_for_exit, wait_for_url
from tests.support.databases import fresh_database
from tests.support.server import TEST_CONFIG, free_port

NEWER = "9001"  # a revision no release of this code has
PREVIOUS = known_revisions()[-2]
WAITING = ("another migration is running", "migration_waiting")


@pytest.fixture
def migrated_url() -> Iterator[str]:
    """A PostgreSQL database at this code's newest migration, dropped afterwards."""
    with fresh_database("runyard_revisions", migrated=True) as url:
        yield url


def mark_newer(url: str, serves_code_from: str | None) -> None:
    """Leave the database as a newer release would: at NEWER, served by code from
    `serves_code_from` on (no word at all when None)."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("UPDATE alembic_version SET version_num = %s", (NEWER,))
        if serves_code_from is not None:
            conn.execute(
                "INSERT INTO schema_compatibility (revision, serves_code_from) VALUES (%s, %s)",
                (NEWER, serves_code_from),
            )


def revision_of(url: str) -> str:
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT version_num FROM alembic_version").fetchone()
    assert row is not None
    return str(row[0])


def serve(runner: Cli, url: str, *flags: str) -> tuple[subprocess.Popen[bytes], Path]:
    """`runyard serve` on `url` (without Redis), started in the background."""
    args = ["serve", *flags, "--port", str(free_port()), "--config", str(TEST_CONFIG)]
    return runner.start(*args, env={"DATABASE_URL": url})


def lines_with(output: str, event: str) -> list[str]:
    return [line for line in output.splitlines() if event in line]


@pytest.mark.parametrize("backend", ["postgres", "sqlite"])
def test_migrate_to_moves_the_schema_up_and_down_and_status_says_where(
    runner: Cli, backend: str, tmp_path: Path
) -> None:
    with (
        fresh_database("runyard_revisions")
        if backend == "postgres"
        else _sqlite_url(tmp_path) as url
    ):
        env = {"DATABASE_URL": url}
        code, output = runner.run("migrate", "--status", env=env)
        assert code == 0, output
        assert "current revision: none (no Runyard tables)" in output
        assert f"newest revision: {SCHEMA_REVISION}" in output
        assert "this Runyard can serve on it: no: the database" in output

        code, output = runner.run("migrate", "--to", "head", env=env)
        assert code == 0, output
        assert f"newest migration ({SCHEMA_REVISION}; was no Runyard tables)" in output
        code, output = runner.run("migrate", "--to", PREVIOUS, env=env)
        assert code == 0, output
        assert f"database moved from migration {SCHEMA_REVISION} to {PREVIOUS}" in output
        code, output = runner.run("migrate", "--status", env=env)
        assert f"current revision: {PREVIOUS}" in output, output
        assert f"older than this Runyard's {SCHEMA_REVISION}: run `runyard migrate`" in output

        code, output = runner.run("migrate", env=env)
        assert code == 0, output
        assert f"newest migration ({SCHEMA_REVISION}; was {PREVIOUS})" in output
        code, output = runner.run("migrate", "--to", "0042", env=env)
        assert code == 2
        assert "unknown migration '0042': this Runyard knows 0001, 0002" in output
        assert "Traceback" not in output


class _sqlite_url:
    """A SQLite database file's URL, as a context manager like fresh_database."""

    def __init__(self, folder: Path) -> None:
        self.url = f"sqlite+aiosqlite:///{folder / 'revisions.sqlite'}"

    def __enter__(self) -> str:
        return self.url

    def __exit__(self, *_exc: object) -> None:
        return None


@pytest.mark.postgres
@pytest.mark.parametrize("flags", [(), ("--no-migrate",)], ids=["migrate-on-start", "no-migrate"])
def test_an_instance_serves_on_a_newer_schema_that_serves_its_code(
    runner: Cli, migrated_url: str, flags: tuple[str, ...]
) -> None:
    mark_newer(migrated_url, SCHEMA_REVISION)
    proc, log = serve(runner, migrated_url, *flags)
    url, _ = wait_for_url(proc, log)
    said = lines_with(log.read_text(), "schema_newer_than_code")
    assert len(said) == 1, log.read_text()
    assert f"code_revision={SCHEMA_REVISION} schema_revision={NEWER}" in said[0]
    ready = httpx.get(f"{url}/readyz", timeout=10)
    assert (ready.status_code, ready.json()["migrations"]) == (200, "ok")
    thread = httpx.post(f"{url}/threads", json={"metadata": {"on": "newer"}}, timeout=10)
    assert thread.status_code == 200, thread.text
    assert revision_of(migrated_url) == NEWER  # never downgraded

    env = {"DATABASE_URL": migrated_url}
    code, output = runner.run("migrate", "--status", env=env)
    assert f"this Runyard can serve on it: yes (code from migration {SCHEMA_REVISION} on" in output
    code, output = runner.run("migrate", env=env)
    assert code == 0, output
    assert f"at migration {NEWER}, newer than this Runyard's {SCHEMA_REVISION}" in output
    assert revision_of(migrated_url) == NEWER


@pytest.mark.postgres
def test_an_instance_refuses_a_newer_schema_it_cannot_serve_on_in_one_line(
    runner: Cli, migrated_url: str
) -> None:
    mark_newer(migrated_url, "9000")
    code, output = wait_for_exit(*serve(runner, migrated_url))
    assert code != 0
    failures = lines_with(output, "startup_failed")
    assert len(failures) == 1, output
    for named in (NEWER, SCHEMA_REVISION, f"`runyard migrate --to {SCHEMA_REVISION}`"):
        assert named in failures[0], failures[0]
    assert "serves code from migration 9000 on" in failures[0]
    assert "Traceback" not in output
    assert "Application startup complete" not in output
    assert revision_of(migrated_url) == NEWER


@pytest.mark.postgres
def test_a_newer_schema_that_does_not_say_who_serves_on_it_is_left_alone(
    runner: Cli, migrated_url: str
) -> None:
    mark_newer(migrated_url, None)
    env = {"DATABASE_URL": migrated_url}
    code, output = runner.run("migrate", "--status", env=env)
    assert code == 0, output
    assert "this Runyard can serve on it: no" in output
    assert "does not say which code serves on it" in output
    code, output = runner.run("migrate", env=env)
    assert code == 2
    assert f"`runyard migrate --to {SCHEMA_REVISION}`" in output
    assert "Traceback" not in output
    assert revision_of(migrated_url) == NEWER


@pytest.mark.postgres
def test_an_older_schema_is_refused_without_migrate_on_start_and_migrated_with_it(
    runner: Cli, migrated_url: str
) -> None:
    code, output = runner.run("migrate", "--to", PREVIOUS, env={"DATABASE_URL": migrated_url})
    assert code == 0, output
    code, output = wait_for_exit(*serve(runner, migrated_url, "--no-migrate"))
    assert code != 0
    failures = lines_with(output, "startup_failed")
    assert len(failures) == 1, output
    for named in (f"at migration {PREVIOUS}", SCHEMA_REVISION, "`runyard migrate`"):
        assert named in failures[0], failures[0]
    assert "Traceback" not in output

    proc, log = serve(runner, migrated_url)
    wait_for_url(proc, log)
    migrated = lines_with(log.read_text(), "schema_migrated")
    assert len(migrated) == 1, log.read_text()
    assert f"from_revision={PREVIOUS} to_revision={SCHEMA_REVISION}" in migrated[0]
    assert revision_of(migrated_url) == SCHEMA_REVISION


@pytest.mark.parametrize("backend", ["postgres", "sqlite"])
def test_two_migrators_take_turns(runner: Cli, backend: str, tmp_path: Path) -> None:
    """A migration Job and an instance starting with RUNYARD_MIGRATE_ON_START (two Jobs on
    SQLite) on a schema one migration behind: the first holds the migration lock, kept inside
    its migration here by a lock the test holds; the second waits for it and finds nothing
    left to do."""
    with (
        fresh_database("runyard_revisions")
        if backend == "postgres"
        else _sqlite_url(tmp_path) as url
    ):
        env = {"DATABASE_URL": url}
        code, output = runner.run("migrate", "--to", PREVIOUS, env=env)
        assert code == 0, output
        with _hold_writes(backend, url):
            job = runner.start("migrate", env=env)
            if backend == "postgres":
                other = serve(runner, url)
            else:
                other = runner.start("migrate", env=env)
            waiter = _until_one_waits([job, other])
            holder = job if waiter is other else other
            assert holder[0].poll() is None, holder[1].read_text()  # inside its migration
        code, output = wait_for_exit(*job)
        assert code == 0, output
        if backend == "postgres":
            wait_for_url(*other)
            outputs = output + other[1].read_text()
        else:
            code, second = wait_for_exit(*other)
            assert code == 0, second
            outputs = output + second
        done = [
            line
            for line in outputs.splitlines()
            if f"was {PREVIOUS})" in line or f"schema_migrated from_revision={PREVIOUS}" in line
        ]
        assert len(done) == 1, outputs  # one migrated, the other found it done


class _hold_writes:
    """Hold the database so that a migrator taking its turn stops inside the migration:
    PostgreSQL's alembic_version locked against writes (reads go on), SQLite's write lock."""

    def __init__(self, backend: str, url: str) -> None:
        self.backend, self.url = backend, url

    def __enter__(self) -> None:
        if self.backend == "postgres":
            self.pg = psycopg.connect(self.url)
            self.pg.execute("LOCK TABLE alembic_version IN SHARE MODE")
        else:
            self.lite = sqlite3.connect(self.url.split(":///", 1)[1], isolation_level=None)
            self.lite.execute("BEGIN IMMEDIATE")

    def __exit__(self, *_exc: object) -> None:
        if self.backend == "postgres":
            self.pg.commit()
            self.pg.close()
        else:
            self.lite.execute("COMMIT")
            self.lite.close()


def _until_one_waits(
    started: list[tuple[subprocess.Popen[bytes], Path]], timeout: float = 90
) -> tuple[subprocess.Popen[bytes], Path]:
    """The process that says it waits for another migrator."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for proc, log in started:
            if any(text in log.read_text() for text in WAITING):
                return proc, log
            if proc.poll() is not None:
                pytest.fail(f"a migrator exited while it should wait:\n{log.read_text()}")
        time.sleep(0.1)
    pytest.fail("neither migrator waited for the other:\n" + started[0][1].read_text())
