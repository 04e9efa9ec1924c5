"""The `runyard` command's help, flags and version, and the command table of docs/commands.md."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from runyard import __version__
from runyard.deploy.debian import DebianImages
from tests.support.server import ROOT

COMMANDS = (
    "dev",
    "serve",
    "migrate",
    "build-ui",
    "dockerfile",
    "build",
    "up",
    "down",
    "k8s",
    "base-images",
    "validate",
    "new",
)
CONFIG_COMMANDS = (
    "dev",
    "serve",
    "build-ui",
    "dockerfile",
    "build",
    "up",
    "down",
    "k8s",
    "validate",
)


def help_of(*args: str) -> str:
    """The output of `runyard ARGS --help`."""
    done = subprocess.run(
        [sys.executable, "-m", "runyard.cli", *args, "--help"],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    return done.stdout


def command_row(command: str) -> str:
    """The row of `runyard COMMAND` in the command table of docs/commands.md."""
    page = (ROOT / "docs" / "commands.md").read_text()
    starts = (f"| `runyard {command} ", f"| `runyard {command}`")
    rows = [line for line in page.splitlines() if line.startswith(starts)]
    assert len(rows) == 1, f"docs/commands.md has {len(rows)} rows for runyard {command}"
    return rows[0]


def test_version() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "runyard.cli", "--version"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"runyard {__version__}"


@pytest.mark.parametrize("command", CONFIG_COMMANDS)
def test_every_command_with_a_config_takes_both_spellings(command: str) -> None:
    assert re.search(r"-c (CONFIG|F\w*), --config", help_of(command)), help_of(command)


@pytest.mark.parametrize(
    ("command", "default"), [("dev", "2024"), ("serve", "8000"), ("up", "8123")]
)
def test_port_help_states_the_default(command: str, default: str) -> None:
    text = " ".join(help_of(command).split())
    options = text[text.index("options:") :]
    port_help = options[options.index("--port PORT") :][:160]
    assert f"default {default}" in port_help, port_help


def test_migrate_help_names_the_database_setting() -> None:
    assert "DATABASE_URL" in help_of("migrate")


@pytest.mark.parametrize("command", COMMANDS)
def test_command_table_lists_every_flag(command: str) -> None:
    flags = set(re.findall(r"(?<![\w-])(--[a-z][a-z-]*)", help_of(command))) - {"--help"}
    row = command_row(command)
    missing = sorted(flag for flag in flags if flag not in row)
    assert not missing, f"docs/commands.md's row for runyard {command} lacks {missing}"


def test_base_images_prints_flags_that_up_and_build_take() -> None:
    def flags_of(command: str) -> set[str]:
        return set(re.findall(r"(?<![\w-])(--[a-z][a-z-]*)", help_of(command)))

    every = DebianImages("base", {"postgres": "p", "redis": "r", "nginx": "n"}).up_flags()
    assert {flag for flag in every if flag.startswith("--")} <= flags_of("up")
    base_only = DebianImages("base", {}).up_flags()
    assert {flag for flag in base_only if flag.startswith("--")} <= flags_of("build")
