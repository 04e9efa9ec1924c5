"""What a failed or killed Docker test run leaves in the cached daemon data root is removed.

Reference: after a `runyard up` test run that failed before its teardown, the next run's
PostgreSQL started on the old run's database volume, initialised with the old run's random
password, and refused the new one (`password authentication failed for user "runyard"`).
The daemon removes every container, then every volume, when it starts and when it stops.
A docker CLI stand-in records the commands: the real daemon is the Docker tests' own.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.docker import DockerDaemon

DOCKER_CLI = """#!/bin/sh
echo "$*" >> "$(dirname "$0")/calls"
case "$*" in
    *"ps -aq") printf '%s' "$CONTAINERS" ;;
    *"volume ls -q") printf '%s' "$VOLUMES" ;;
esac
"""


def commands_run(tmp_path: Path) -> list[str]:
    """The docker commands the stand-in received, without the socket option."""
    calls = (tmp_path / "calls").read_text().splitlines()
    prefix = f"-H unix://{tmp_path / 'docker.sock'} "
    assert all(call.startswith(prefix) for call in calls), calls
    return [call.removeprefix(prefix) for call in calls]


@pytest.fixture
def daemon(tmp_path: Path) -> DockerDaemon:
    """A daemon whose CLI is the stand-in (the daemon itself is never started)."""
    cli = tmp_path / "docker"
    cli.write_text(DOCKER_CLI)
    cli.chmod(0o755)
    return DockerDaemon(root=tmp_path, client=str(cli))


@pytest.mark.parametrize(
    ("containers", "volumes", "expected"),
    [
        (
            "3f2a\n9b1c\n",
            "template_postgres-data\ntemplate_redis-data\n",
            [
                "ps -aq",
                "rm -f 3f2a 9b1c",
                "volume ls -q",
                "volume rm -f template_postgres-data template_redis-data",
            ],
        ),
        ("", "", ["ps -aq", "volume ls -q"]),
    ],
    ids=["leftovers", "nothing-left"],
)
def test_leftover_containers_then_volumes_are_removed(
    daemon: DockerDaemon,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    containers: str,
    volumes: str,
    expected: list[str],
) -> None:
    monkeypatch.setenv("CONTAINERS", containers)
    monkeypatch.setenv("VOLUMES", volumes)
    daemon.remove_leftovers()
    assert commands_run(tmp_path) == expected
