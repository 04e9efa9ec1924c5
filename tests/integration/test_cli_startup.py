"""What `runyard dev` / `runyard serve` say when they start, fail to start, or refuse to."""

from __future__ import annotations

import json
import re
import textwrap
import time
from pathlib import Path

import httpx
import pytest

from runyard.cli import is_loopback
from tests.integration.test_cli import Cli, wait_for_exit
from tests.support.server import ROOT, TEST_CONFIG, free_port

AUTH_CONFIG = ROOT / "tests" / "graphs" / "langgraph_auth.json"


def wait_for_serving(cli: Cli, *args: str, env: dict[str, str] | None = None) -> str:
    """Start the command, wait for its `serving on` line, check /ok on 127.0.0.1; the output."""
    proc, log = cli.start(*args, env=env)
    for _ in range(600):
        output = log.read_text()
        match = re.search(r"serving on http://[^:]+:(\d+)", output)
        if match:
            answer = httpx.get(f"http://127.0.0.1:{match.group(1)}/ok", timeout=5)
            assert answer.json() == {"ok": True}
            return output
        if proc.poll() is not None:
            pytest.fail(f"exited with {proc.returncode}:\n{output[-3000:]}")
        time.sleep(0.1)
    pytest.fail(f"never said it was serving:\n{log.read_text()[-3000:]}")


# --- start-up failures: one line, and no "serving on" -------------------------------------

BROKEN_MODULES = {
    # A model client validating its settings at import (pydantic's message spans lines).
    "validation": (
        """
        from pydantic import BaseModel

        class ChatModel(BaseModel):
            api_key: str

        model = ChatModel()
        """,
        "ValidationError: 1 validation error for ChatModel; api_key; Field required",
    ),
    "sys-exit": (
        """
        import sys

        sys.exit("OPENAI_API_KEY is not set")
        """,
        "SystemExit: OPENAI_API_KEY is not set",
    ),
    "runtime-error": ("raise RuntimeError('missing API key')", "RuntimeError: missing API key"),
}


@pytest.mark.parametrize(
    ("case", "mode"),
    [("validation", "dev"), ("sys-exit", "dev"), ("runtime-error", "dev"), ("validation", "serve")],
)
def test_a_graph_module_raising_at_import_fails_in_one_line(
    runner: Cli, tmp_path: Path, mode: str, case: str
) -> None:
    source, cause = BROKEN_MODULES[case]
    project = tmp_path / "project"
    project.mkdir()
    (project / "agent.py").write_text(textwrap.dedent(source))
    (project / "langgraph.json").write_text('{"graphs": {"agent": "./agent.py:graph"}}')
    args = [mode, "--port", str(free_port()), "--config", str(project / "langgraph.json")]
    args.append("--no-reload" if mode == "dev" else "--sqlite")
    code, output = wait_for_exit(*runner.start(*args))
    assert code == 3, output
    failures = [line for line in output.splitlines() if "startup_failed" in line]
    assert len(failures) == 1, output
    assert (
        f"graph 'agent': importing {(project / 'agent.py').resolve()}:graph failed" in (failures[0])
    )
    assert cause in failures[0]
    assert "Traceback" not in output
    assert "serving on" not in output


# --- runyard serve and runyard dev on a non-loopback address --------------------------------

# `dev` reloads on code changes unless told not to; these tests start it once.
SERVER_COMMANDS = {"serve": ["serve", "--sqlite"], "dev": ["dev", "--no-reload"]}


@pytest.mark.parametrize("command", SERVER_COMMANDS)
def test_a_non_loopback_host_without_auth_is_refused(runner: Cli, command: str) -> None:
    code, output = runner.run(
        *SERVER_COMMANDS[command],
        "--host",
        "0.0.0.0",
        "--port",
        str(free_port()),
        "--config",
        str(TEST_CONFIG),
    )
    assert code == 2, output
    assert "refusing to serve on 0.0.0.0 with no auth configured" in output
    assert "--allow-unauthenticated" in output
    assert "RUNYARD_ALLOW_UNAUTHENTICATED=true" in output
    assert "auth.path" in output
    assert "Traceback" not in output
    assert "serving on" not in output


@pytest.mark.parametrize("command", SERVER_COMMANDS)
@pytest.mark.parametrize(
    ("extra", "env", "config"),
    [
        (["--allow-unauthenticated"], None, TEST_CONFIG),
        ([], {"RUNYARD_ALLOW_UNAUTHENTICATED": "true"}, TEST_CONFIG),
        ([], None, AUTH_CONFIG),
    ],
    ids=["flag", "environment", "auth-configured"],
)
def test_a_non_loopback_host_when_allowed_or_authenticated(
    runner: Cli, command: str, extra: list[str], env: dict[str, str] | None, config: Path
) -> None:
    port = free_port()
    args = [*SERVER_COMMANDS[command], "--host", "0.0.0.0", "--port", str(port)]
    output = wait_for_serving(runner, *args, "--config", str(config), *extra, env=env)
    assert f"serving on http://0.0.0.0:{port}" in output


AUTH_WITHOUT_AUTHENTICATE = """
from langgraph_sdk import Auth

auth = Auth()


@auth.on
async def owner_only(ctx, value):
    return {"owner": ctx.user.identity}
"""


@pytest.mark.parametrize("command", SERVER_COMMANDS)
def test_auth_without_an_authenticate_handler_is_no_auth_off_loopback(
    runner: Cli, tmp_path: Path, command: str
) -> None:
    """Authorization handlers alone authenticate nobody: every request would be anonymous."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "auth.py").write_text(AUTH_WITHOUT_AUTHENTICATE)
    graph = str(ROOT / "examples" / "pipeline.py") + ":graph"
    config = {"graphs": {"pipeline": graph}, "auth": {"path": "./auth.py:auth"}}
    (project / "langgraph.json").write_text(json.dumps(config))
    args = [*SERVER_COMMANDS[command], "--host", "0.0.0.0", "--port", str(free_port())]
    code, output = runner.run(*args, "--config", str(project / "langgraph.json"), timeout=30)
    assert code == 2, output
    assert "refusing to serve on 0.0.0.0" in output
    assert "@auth.authenticate" in output and "./auth.py:auth" in output
    assert "--allow-unauthenticated" in output
    assert "Traceback" not in output
    assert "serving on" not in output


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.0.0.2", True),
        ("localhost", True),
        ("::1", True),
        ("[::1]", True),
        ("0.0.0.0", False),
        ("::", False),
        ("", False),
        ("192.168.1.10", False),
        ("example.internal", False),
    ],
)
def test_loopback_addresses(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback
