"""What `runyard dev` / `serve` say when the generative UI (`ui` in langgraph.json) cannot be
built or was not: one `startup_failed` line naming the entry and the command to run, exit
code 3, no traceback, never "serving on"."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from runyard.deploy.dockerfile import render_dockerfile
from runyard.deploy.project import load_build_config
from tests.integration.test_cli import Cli, wait_for_exit
from tests.support.server import ROOT, free_port

pytestmark = pytest.mark.timeout(120)
GENUI = ROOT / "tests" / "projects" / "genui"


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


def test_the_images_ui_stage_builds_what_a_server_without_node_serves(
    runner: Cli, project: Path, tmp_path: Path
) -> None:
    """The commands of the Dockerfile's `ui` stage, run here as the stage runs them (no
    Docker daemon needed), build a UI that `runyard dev` serves with no node on its PATH and
    the image's RUNYARD_UI_* settings."""
    build = load_build_config(project / "langgraph.json")
    lines = render_dockerfile(build, "runyard.whl").splitlines()
    stage = lines[lines.index("FROM ${NODE_IMAGE} AS ui") : lines.index("FROM ${BASE_IMAGE}")]
    env_line = next(line for line in stage if line.startswith("ENV "))
    env = dict(part.split("=", 1) for part in shlex.split(env_line)[1:])
    run = next(line for line in stage if line.startswith("RUN npx "))
    output = tmp_path / "image-ui"
    done = subprocess.run(
        run.removeprefix("RUN ").replace(" /ui", f" {output}"),
        shell=True,
        cwd=project,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stdout + done.stderr

    no_node = tmp_path / "no-node"
    no_node.mkdir()
    settings = {"PATH": str(no_node), "RUNYARD_UI_BUILD": "false", "RUNYARD_UI_DIR": str(output)}
    port = free_port()
    proc, log = runner.start(
        "dev",
        "--no-reload",
        "--port",
        str(port),
        "--config",
        str(project / "langgraph.json"),
        env=settings,
    )
    url = f"http://127.0.0.1:{port}"
    for _ in range(300):
        try:
            if httpx.get(f"{url}/ok", timeout=1).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        assert proc.poll() is None, log.read_text()
        time.sleep(0.1)
    tags = httpx.post(f"{url}/ui/agent", json={"name": "weather"}, timeout=10)
    assert tags.status_code == 200 and "/ui/agent/entrypoint.js" in tags.text
    script = httpx.get(f"{url}/ui/agent/entrypoint.js", timeout=10)
    assert script.content == (output / "public" / "agent" / "entrypoint.js").read_bytes()
    assert "ui_built" not in log.read_text()


def test_dev_rebuilds_the_ui_when_its_source_changes(runner: Cli, project: Path) -> None:
    """With reload (the default), an edit of ui.tsx restarts dev, which builds it again;
    the build's own output (under the data folder, in the working directory here) does not
    set off another reload."""
    port = free_port()
    proc, log = runner.start(
        "dev", "--port", str(port), "--config", str(project / "langgraph.json")
    )
    script = f"http://127.0.0.1:{port}/ui/agent/entrypoint.js"

    def served(text: str) -> None:
        for _ in range(900):
            try:
                if text in httpx.get(script, timeout=2).text:
                    return
            except httpx.HTTPError:
                pass
            assert proc.poll() is None, log.read_text()
            time.sleep(0.1)
        pytest.fail(f"{text!r} never served:\n{log.read_text()[-3000:]}")

    served("Weather in ")
    ui = project / "src" / "agent" / "ui.tsx"
    ui.write_text(ui.read_text().replace("Weather in ", "Forecast for "))
    served("Forecast for ")
    time.sleep(3)
    assert log.read_text().count("ui_built graph_id=agent") == 2, log.read_text()
