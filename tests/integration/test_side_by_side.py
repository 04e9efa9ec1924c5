"""The previous release and the current code on one database, as a rolling upgrade and a
rollback run them: real `runyard` processes of both, one PostgreSQL database, one Redis.

The previous release is the commit that introduced the schema's compatibility record
(migration 0009): releases before it cannot start on a schema they do not know, so none of
them can be the previous release of this test. Its `runyard` package is taken from this
repository's history (`git archive`) and put first on the PYTHONPATH of the same interpreter.
Every migration added after it is applied with rows in the tables written by that release,
served on by it, and undone.

When a contract migration leaves a schema the pinned release cannot serve on, this test
fails saying so: pin the newest release the schema still serves instead.
"""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from runyard.db.engine import SCHEMA_REVISION
from tests.integration.test_cli import Cli, wait_for_url
from tests.support.databases import fresh_database
from tests.support.redis_keys import REDIS_URL, delete_keys
from tests.support.server import ROOT, TEST_CONFIG, free_port

# The commit that introduced schema_compatibility (migration 0009), on main's history.
PREVIOUS_RELEASE = "c7a8c7ee2fe2f7ac1d204cb0e81fc4848ba4a3cc"

pytestmark = [pytest.mark.slow, pytest.mark.postgres, pytest.mark.timeout(600)]


@dataclass(frozen=True)
class Release:
    """The previous release's package, ready to be put first on PYTHONPATH."""

    folder: Path
    revision: str  # its newest migration


@pytest.fixture(scope="module")
def previous(tmp_path_factory: pytest.TempPathFactory) -> Release:
    """The previous release's `runyard` package, from this repository's history."""
    git = ["git", "-C", str(ROOT)]
    found = subprocess.run(
        [*git, "cat-file", "-e", f"{PREVIOUS_RELEASE}^{{commit}}"], capture_output=True
    )
    if found.returncode != 0:
        pytest.fail(
            f"the previous release's commit {PREVIOUS_RELEASE} is not in the history of "
            f"{ROOT} ({found.stderr.decode().strip() or 'not found'}): this test installs "
            "that release from there. In a shallow clone run `git fetch --unshallow`; a "
            "source tree without git history cannot run it"
        )
    folder = tmp_path_factory.mktemp("previous-release")
    archive = subprocess.run(
        [*git, "archive", PREVIOUS_RELEASE, "runyard"], capture_output=True, check=True
    )
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive.stdout, check=True)
    # What a process started as the old servers are (same interpreter, PYTHONPATH, folder
    # away from the repository) imports: the archived package, not this checkout's.
    probe = subprocess.run(
        [sys.executable, "-c", PROBE],
        cwd=folder,
        env=Cli(folder).env({"PYTHONPATH": str(folder)}),
        capture_output=True,
        text=True,
        check=True,
    )
    location, revision = probe.stdout.split()
    assert Path(location).is_relative_to(folder), location
    return Release(folder, revision)


PROBE = "import runyard, runyard.db.engine as e; print(runyard.__file__, e.SCHEMA_REVISION)"


@pytest.fixture
def deployment() -> Iterator[dict[str, str]]:
    """An empty PostgreSQL database and a Redis prefix of its own, both removed afterwards."""
    with fresh_database("runyard_side_by_side") as url:
        prefix = f"runyard-test-{uuid.uuid4().hex[:8]}:"
        try:
            yield {"DATABASE_URL": url, "REDIS_URL": REDIS_URL, "RUNYARD_REDIS_PREFIX": prefix}
        finally:
            delete_keys(REDIS_URL, prefix)


class Fleet:
    """Instances and commands of either release on the deployment."""

    def __init__(self, runner: Cli, env: dict[str, str], previous: Release) -> None:
        self.runner, self.env, self.previous = runner, env, previous

    def _env(self, old: bool, extra: dict[str, str] | None = None) -> dict[str, str]:
        env = {**self.env, **(extra or {})}
        return {**env, "PYTHONPATH": str(self.previous.folder)} if old else env

    def serve(self, old: bool, **extra: str) -> tuple[str, Path]:
        """Start an instance of the previous release (old) or the current code; its URL
        and log once it answers."""
        args = ["serve", "--port", str(free_port()), "--config", str(TEST_CONFIG)]
        proc, log = self.runner.start(*args, env=self._env(old, extra))
        return wait_for_url(proc, log, timeout=120)[0], log

    def migrate(self, old: bool, *args: str) -> str:
        """`runyard migrate ARGS` of either release; its output (it must succeed)."""
        code, output = self.runner.run("migrate", *args, env=self._env(old), timeout=120)
        assert code == 0, output
        return output

    def stop(self) -> None:
        """Stop every instance (SIGTERM: they drain)."""
        self.runner.stop_all()


def test_the_previous_release_serves_beside_the_current_code_and_after_a_rollback(
    runner: Cli, deployment: dict[str, str], previous: Release
) -> None:
    fleet = Fleet(runner, deployment, previous)
    # The previous release alone, on the schema it made.
    old, _ = fleet.serve(old=True)
    written = {"before": write(old, "before")}
    fleet.stop()

    fleet.migrate(False)
    status = fleet.migrate(True, "--status")
    if "this Runyard can serve on it: yes" not in status:
        pytest.fail(
            f"the schema at {SCHEMA_REVISION} no longer serves the pinned previous release "
            f"{PREVIOUS_RELEASE} (migration {previous.revision}): a contract migration "
            "raised serves_code_from past it. Pin the newest release it still serves.\n" + status
        )

    # Side by side on the migrated schema, as during a rolling upgrade.
    new, _ = fleet.serve(old=False, RUNYARD_MIGRATE_ON_START="false")
    old, old_log = fleet.serve(old=True)
    _newer_schema_said(old_log.read_text(), previous.revision)
    expected = {"before": read(new, written["before"])}
    assert read(old, written["before"]) == expected["before"]
    written["new"] = write(new, "new")
    written["old"] = write(old, "old")
    # An interrupt made by one release, resumed by the other.
    resume(new, written["before"])
    resume(old, written["new"])
    expected = {tag: read(new, ids) for tag, ids in written.items()}
    assert {tag: read(old, ids) for tag, ids in written.items()} == expected
    fleet.stop()

    # Rolled back: the schema back to the previous release's, which serves the data again.
    fleet.migrate(False, "--to", previous.revision)
    old, old_log = fleet.serve(old=True, RUNYARD_MIGRATE_ON_START="false")
    assert "schema_newer_than_code" not in old_log.read_text()
    assert {tag: read(old, ids) for tag, ids in written.items()} == expected
    resume(old, written["old"])
    written["after"] = write(old, "after")
    assert read(old, written["after"])["thread"]["status"] == "idle"


def _newer_schema_said(log: str, old_revision: str) -> None:
    """The previous release says, in one line, that it serves on a newer schema: the proof
    that the archived code is what runs (when a migration newer than it exists)."""
    said = [line for line in log.splitlines() if "schema_newer_than_code" in line]
    if SCHEMA_REVISION == old_revision:
        assert said == [], log  # no migration after the pinned release yet
        return
    assert len(said) == 1, log
    assert f"code_revision={old_revision} schema_revision={SCHEMA_REVISION}" in said[0]


def call(url: str, method: str, path: str, body: Any = None) -> Any:
    """One request; its JSON body (None when it has none), after checking it succeeded."""
    response = httpx.request(method, f"{url}{path}", json=body, timeout=60)
    assert response.status_code < 300, f"{method} {path}: {response.status_code} {response.text}"
    return response.json() if response.content else None


def write(url: str, tag: str) -> dict[str, str]:
    """Through the instance at `url`: an assistant with two versions, a thread with a
    finished chat run, an interrupted thread, a store item and a cron; their ids."""
    assistant = call(url, "POST", "/assistants", {"graph_id": "agent", "name": f"a-{tag}"})
    aid = assistant["assistant_id"]
    call(url, "PATCH", f"/assistants/{aid}", {"metadata": {"tag": tag, "version": 2}})
    thread = call(url, "POST", "/threads", {"metadata": {"tag": tag}})["thread_id"]
    message = {"role": "user", "content": f"hello from {tag}"}
    body = {"assistant_id": aid, "input": {"messages": [message]}}
    call(url, "POST", f"/threads/{thread}/runs/wait", body)
    asked = call(url, "POST", "/threads", {"metadata": {"tag": tag, "asks": True}})["thread_id"]
    body = {"assistant_id": "asker", "input": {"value": tag}}
    call(url, "POST", f"/threads/{asked}/runs/wait", body)
    item = {"namespace": ["side", tag], "key": "k", "value": {"tag": tag}}
    call(url, "PUT", "/store/items", item)
    body = {"assistant_id": aid, "schedule": "0 0 1 1 *", "input": {"messages": [message]}}
    cron = call(url, "POST", f"/threads/{thread}/runs/crons", body)["cron_id"]
    return {"assistant": aid, "thread": thread, "asked": asked, "tag": tag, "cron": cron}


def resume(url: str, ids: dict[str, str]) -> None:
    """Answer the interrupted thread's question through the instance at `url`."""
    body = {"assistant_id": "asker", "command": {"resume": "yes"}}
    values = call(url, "POST", f"/threads/{ids['asked']}/runs/wait", body)
    assert "answer:yes" in values["seen"], values


def read(url: str, ids: dict[str, str]) -> dict[str, Any]:
    """What the instance at `url` answers about what `write` made, in the fields both
    releases answer with."""
    aid, thread, asked = ids["assistant"], ids["thread"], ids["asked"]
    assistant = call(url, "GET", f"/assistants/{aid}")
    versions = call(url, "POST", f"/assistants/{aid}/versions", {})
    runs = call(url, "GET", f"/threads/{thread}/runs")
    asked_state = call(url, "GET", f"/threads/{asked}/state")
    crons = call(url, "POST", "/runs/crons/search", {"thread_id": thread})
    item = call(url, "GET", f"/store/items?namespace=side.{ids['tag']}&key=k")
    return {
        "assistant": _pick(assistant, "name", "graph_id", "metadata", "version"),
        "versions": sorted(version["version"] for version in versions),
        "thread": _pick(call(url, "GET", f"/threads/{thread}"), "metadata", "status"),
        "values": call(url, "GET", f"/threads/{thread}/state")["values"],
        "history": len(call(url, "POST", f"/threads/{thread}/history", {"limit": 100})),
        "runs": sorted(_pick(run, "run_id", "status") for run in runs),
        "asked": _pick(call(url, "GET", f"/threads/{asked}"), "status", "metadata"),
        "asked_values": asked_state["values"],
        "asked_next": asked_state["next"],
        "crons": [_pick(cron, "cron_id", "schedule") for cron in crons],
        "item": item["value"],
    }


def _pick(document: dict[str, Any], *keys: str) -> Any:
    picked = {key: document[key] for key in keys}
    return sorted(picked.items()) if "run_id" in keys else picked
