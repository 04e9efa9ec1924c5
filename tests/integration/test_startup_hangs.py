"""`runyard dev` on a project shaped like LangGraph's templates (no `.env`, a store whose
embedder fails at start, a missing config): one line and a non-zero exit, reload or not."""

from __future__ import annotations

import textwrap
import time
from pathlib import Path

import pytest

from tests.integration.test_cli import Cli, wait_for_exit
from tests.support.server import free_port

pytestmark = pytest.mark.timeout(60)

GRAPH = textwrap.dedent(
    """
    from typing import TypedDict

    from langgraph.graph import StateGraph


    class State(TypedDict):
        x: int


    builder = StateGraph(State)
    builder.add_node("step", lambda state: state)
    builder.set_entry_point("step")
    graph = builder.compile()
    """
)


def memory_agent_like(tmp_path: Path) -> Path:
    """A project as memory-agent: no .env, `store.index` embedding by `provider:model`, which
    fails at start here (no provider package, no API key)."""
    project = tmp_path / "memory-agent"
    project.mkdir()
    (project / "agent.py").write_text(GRAPH)
    config = project / "langgraph.json"
    config.write_text(
        '{"graphs": {"agent": "./agent.py:graph"}, "env": ".env", '
        '"store": {"index": {"embed": "openai:text-embedding-3-small", "dims": 1536}}}'
    )
    return config


@pytest.mark.parametrize("reload", [True, False], ids=["reload", "no-reload"])
@pytest.mark.parametrize("case", ["embedder", "missing-config"])
def test_dev_start_up_failure_is_one_line_and_an_exit_within_10_s(
    runner: Cli, tmp_path: Path, reload: bool, case: str
) -> None:
    config = (
        memory_agent_like(tmp_path) if case == "embedder" else tmp_path / "nowhere/langgraph.json"
    )
    args = ["dev", "--port", str(free_port()), "--config", str(config)]
    if not reload:
        args.append("--no-reload")
    started = time.monotonic()
    code, output = wait_for_exit(*runner.start(*args, env={"OPENAI_API_KEY": ""}), timeout=10)
    assert time.monotonic() - started < 10
    assert code == 3, output
    failures = [line for line in output.splitlines() if "startup_failed" in line]
    assert len(failures) == 1, output
    assert ("openai:text-embedding-3-small" if case == "embedder" else str(config)) in failures[0]
    assert "Traceback" not in output
    assert "serving on" not in output


def serving_port(log: Path, after: int = 0, timeout: float = 30) -> int:
    """The port of the `serving on` line number `after` + 1 of the log."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        lines = [line for line in log.read_text().splitlines() if "serving on" in line]
        if len(lines) > after:
            return int(lines[after].rsplit(":", 1)[1])
        time.sleep(0.1)
    pytest.fail(f"no serving line #{after + 1}:\n{log.read_text()[-3000:]}")


def test_a_reload_that_fails_waits_for_the_fix_and_sigterm_still_stops_cleanly(
    runner: Cli, tmp_path: Path
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "agent.py").write_text(GRAPH)
    (project / "langgraph.json").write_text('{"graphs": {"agent": "./agent.py:graph"}}')
    config = str(project / "langgraph.json")
    proc, log = runner.start("dev", "--port", str(free_port()), "--config", config)
    serving_port(log)
    (project / "agent.py").write_text("raise RuntimeError('half-edited')\n")
    deadline = time.monotonic() + 30
    while "half-edited" not in log.read_text() and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(1)
    assert proc.poll() is None, log.read_text()  # still waiting for the fix
    (project / "agent.py").write_text(GRAPH)
    serving_port(log, after=1)
    proc.terminate()
    assert proc.wait(timeout=20) != 3, log.read_text()
