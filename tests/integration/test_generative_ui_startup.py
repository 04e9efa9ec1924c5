"""What `runyard dev` / `serve` say when the generative UI (`ui` in langgraph.json) cannot be
built or was not: one `startup_failed` line naming the entry and the command to run, exit
code 3, no traceback, never "serving on"."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.test_cli import Cli, wait_for_exit
from tests.support.server import ROOT, free_port

pytestmark = pytest.mark.timeout(120)
GENUI = ROOT / "tests" / "projects" / "genui"


@pytest.fixture
def runner(tmp_path: Path) -> Iterator[Cli]:
    """A CLI runner whose processes are always stopped after the test."""
    cli = Cli(tmp_path)
    try:
        yield cli
    finally:
        cli.stop_all()


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A copy of the genui project, to break."""
    copy = tmp_path / "genui"
    shutil.copytree(GENUI, copy)
    return copy


def start_failure(runner: Cli, mode: str, config: Path, env: dict[str, str]) -> str:
    """Start `mode` on the config; assert it failed as a start-up fails; the failure line."""
    args = [mode, "--port", str(free_port()), "--config", str(config)]
    if mode == "dev":
        args.append("--no-reload")
    code, output = wait_for_exit(*runner.start(*args, env=env), timeout=90)
    assert code == 3, output
    failures = [line for line in output.splitlines() if "startup_failed" in line]
    assert len(failures) == 1, output
    assert "Traceback" not in output
    assert "serving on" not in output
    return failures[0]


@pytest.mark.parametrize("mode", ["dev", "serve"])
def test_no_node_says_what_to_install(
    runner: Cli, project: Path, tmp_path: Path, mode: str
) -> None:
    empty = tmp_path / "no-node"
    empty.mkdir()
    # The UI is built before the database is opened: serve fails on it first.
    env = {"PATH": str(empty), "DATABASE_URL": "postgresql://postgres@127.0.0.1:5432/unused"}
    line = start_failure(runner, mode, project / "langgraph.json", env)
    assert "ui.agent (./src/agent/ui.tsx)" in line
    assert "`npx` is not on the PATH" in line and "https://nodejs.org" in line
    assert "runyard build-ui" in line and "RUNYARD_UI_BUILD=false" in line


def test_a_failing_build_names_the_entry_the_error_and_the_command(
    runner: Cli, project: Path
) -> None:
    ui = project / "src" / "agent" / "ui.tsx"
    ui.write_text(ui.read_text().replace("</div>", "</dvi>"))
    line = start_failure(runner, "dev", project / "langgraph.json", {})
    assert "ui.agent (./src/agent/ui.tsx): the build failed (exit 1)" in line
    # esbuild's own message, and where.
    assert "Unexpected closing" in line and "ui.tsx" in line
    assert f"run `runyard build-ui --config {project / 'langgraph.json'}`" in line


def test_serving_a_prebuilt_ui_that_is_not_there_says_to_build_it(
    runner: Cli, project: Path, tmp_path: Path
) -> None:
    env = {"RUNYARD_UI_BUILD": "false", "RUNYARD_UI_DIR": str(tmp_path / "nothing")}
    line = start_failure(runner, "dev", project / "langgraph.json", env)
    assert "RUNYARD_UI_BUILD=false and no build found" in line
    assert "run `runyard build-ui`" in line


def test_build_ui_shows_the_builders_output_when_it_fails(runner: Cli, project: Path) -> None:
    ui = project / "src" / "agent" / "ui.tsx"
    ui.write_text(ui.read_text().replace("</div>", "</dvi>"))
    code, output = runner.run("build-ui", "-c", str(project / "langgraph.json"), timeout=90)
    assert code == 2, output
    assert "ERROR" in output and "Unexpected closing" in output
    assert "ui.agent (./src/agent/ui.tsx): the build failed, see its output above" in output
    assert "Traceback" not in output
