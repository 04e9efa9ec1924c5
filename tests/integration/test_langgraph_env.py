"""LangGraph's server's environment names: an image built for it runs on Runyard with its
environment unchanged, and what Runyard does not read is named once at start-up.

Reference: langgraph-api 0.16.7 reads its configuration from the environment (its config
module); `langgraph build` writes LANGSERVE_GRAPHS and the JSON forms of langgraph.json's
keys (LANGGRAPH_HTTP, LANGGRAPH_STORE, ...) into the image, with no langgraph.json.
"""

from __future__ import annotations

import json
import logging
import textwrap
from pathlib import Path

import httpx
import pytest

from runyard.app.factory import create_app
from runyard.domain.langgraph_env import CONFIG_ENV_NAMES, LANGGRAPH_NAMES, PASSED_ON
from runyard.project.config_env import declared_auth
from runyard.settings import OFFICIAL_NAMES, OLDER_NAMES, Settings, setting_names
from tests.integration.test_cli import Cli
from tests.integration.test_cli_startup import wait_for_serving
from tests.support.server import free_port

pytestmark = pytest.mark.timeout(90)

LOOPING_GRAPH = """
from typing import TypedDict

from langgraph.graph import END, START, StateGraph


class State(TypedDict):
    steps: int


def step(state: State) -> dict:
    return {"steps": state.get("steps", 0) + 1}


builder = StateGraph(State)
builder.add_node("step", step)
builder.add_edge(START, "step")
builder.add_conditional_edges("step", lambda s: END if s["steps"] >= 10 else "step")
graph = builder.compile()
"""


def write_graph(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "agent.py"
    path.write_text(textwrap.dedent(LOOPING_GRAPH))
    return path


def test_an_image_for_langgraphs_server_serves_from_its_environment(
    runner: Cli, tmp_path: Path
) -> None:
    """No langgraph.json: the graphs and the http section come from the environment, as in
    an image `langgraph build` made; FF_CRONS_ENABLED and HTTP_MAX_REQUEST_BODY_BYTES are
    read; the names Runyard does not read are named in one warning."""
    graph = write_graph(tmp_path / "deps" / "src")
    port = free_port()
    env = {
        "LANGSERVE_GRAPHS": json.dumps({"agent": f"{graph}:graph"}),
        "LANGGRAPH_HTTP": json.dumps({"disable_store": True}),
        "FF_CRONS_ENABLED": "false",
        "HTTP_MAX_REQUEST_BODY_BYTES": "2000",
        "LANGGRAPH_CLOUD_LICENSE_KEY": "lcl-test",
        "REDIS_CLUSTER": "false",
        "LANGSMITH_TRACING": "false",
    }
    try:
        output = wait_for_serving(runner, "serve", "--sqlite", "--port", str(port), env=env)
        base = f"http://127.0.0.1:{port}"
        found = httpx.post(f"{base}/assistants/search", json={}, timeout=10).json()
        assert [a["graph_id"] for a in found] == ["agent"]
        # LANGGRAPH_HTTP's disable_store took the store's routes away.
        assert httpx.post(f"{base}/store/items/search", json={}, timeout=10).status_code == 404
        # HTTP_MAX_REQUEST_BODY_BYTES: a 3000-byte body is refused.
        big = {"metadata": {"pad": "x" * 3000}}
        assert httpx.post(f"{base}/threads", json=big, timeout=10).status_code == 413
        assert httpx.post(f"{base}/threads", json={}, timeout=10).status_code == 200
        assert "crons=off (FF_CRONS_ENABLED=false)" in output
        warnings = [
            line for line in output.splitlines() if "langgraph_settings_not_supported" in line
        ]
        assert len(warnings) == 1, output
        assert "LANGGRAPH_CLOUD_LICENSE_KEY,REDIS_CLUSTER" in warnings[0]
        for read in ("LANGSERVE_GRAPHS", "LANGGRAPH_HTTP", "FF_CRONS_ENABLED", "LANGSMITH_TRACING"):
            assert read not in warnings[0]
    finally:
        runner.stop_all()


async def test_the_default_recursion_limit_is_langgraphs_setting(tmp_path: Path) -> None:
    write_graph(tmp_path)
    (tmp_path / "langgraph.json").write_text('{"graphs": {"agent": "./agent.py:graph"}}')
    settings = Settings(
        DATABASE_URL="",
        REDIS_URL="",
        RUNYARD_DATA_DIR=tmp_path / "data",
        RUNYARD_CONFIG=tmp_path / "langgraph.json",
        LANGGRAPH_DEFAULT_RECURSION_LIMIT=3,
    )
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://runyard") as http:
            body = {"assistant_id": "agent", "input": {"steps": 0}}
            limited = await http.post("/runs/wait", json=body)
            assert "GraphRecursionError" in limited.text, limited.text
            # A run that sets its own limit keeps it.
            body["config"] = {"recursion_limit": 50}
            done = await http.post("/runs/wait", json=body)
            assert done.json() == {"steps": 10}


def test_postgres_uri_is_read_as_langgraphs_server_reads_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("DATABASE_URL", "DATABASE_URI"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("POSTGRES_URI", "postgres://u@db:5432/app")
    assert Settings().database_url == "postgresql+asyncpg://u@db:5432/app"
    monkeypatch.setenv("DATABASE_URI", "postgres://u@other:5432/app")
    assert Settings().database_url == "postgresql+asyncpg://u@other:5432/app"


def test_the_names_runyard_reads_for_langgraph_are_on_the_one_list() -> None:
    """Every LangGraph name Runyard reads is one of langgraph-api's (a typo would be a
    setting nobody sets), and the names the issue found ignored are now read."""
    read = set(setting_names()) | set(CONFIG_ENV_NAMES.values())
    langgraphs = {*OFFICIAL_NAMES.values(), *OLDER_NAMES.values(), *CONFIG_ENV_NAMES.values()}
    assert langgraphs <= LANGGRAPH_NAMES
    assert PASSED_ON <= LANGGRAPH_NAMES
    for name in (
        "POSTGRES_URI",
        "FF_CRONS_ENABLED",
        "HTTP_MAX_REQUEST_BODY_BYTES",
        "LANGGRAPH_DEFAULT_RECURSION_LIMIT",
        "LANGGRAPH_HTTP",
        "LANGSERVE_GRAPHS",
    ):
        assert name in read and name in LANGGRAPH_NAMES, name
    assert len(LANGGRAPH_NAMES) == 134  # langgraph-api 0.16.7


async def test_one_warning_names_the_unread_settings_and_only_those(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    write_graph(tmp_path)
    (tmp_path / "langgraph.json").write_text('{"graphs": {"agent": "./agent.py:graph"}}')
    for name in LANGGRAPH_NAMES:
        monkeypatch.delenv(name, raising=False)
    read = set(setting_names()) | set(CONFIG_ENV_NAMES.values()) | PASSED_ON
    for name in sorted(LANGGRAPH_NAMES - read):
        monkeypatch.setenv(name, "1")
    monkeypatch.setenv("LANGGRAPH_HTTP", json.dumps({"disable_store": True}))
    settings = Settings(DATABASE_URL="", REDIS_URL="", RUNYARD_CONFIG=tmp_path / "langgraph.json")
    with caplog.at_level(logging.WARNING, logger="runyard"):
        app = create_app(settings)
    named = [r.getMessage() for r in caplog.records if "not_supported" in r.getMessage()]
    assert len(named) == 1, named
    listed = named[0].split("names=")[1].split()[0].split(",")
    assert listed == sorted(LANGGRAPH_NAMES - read)
    # A config file is the whole configuration: the JSON form beside it is named, unread.
    ignored = [
        r.getMessage() for r in caplog.records if "environment_config_ignored" in r.getMessage()
    ]
    assert len(ignored) == 1 and "LANGGRAPH_HTTP" in ignored[0], ignored
    assert any(getattr(route, "path", "") == "/store/items" for route in app.routes)


def test_serves_auth_check_reads_the_images_langgraph_auth(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`runyard serve --host 0.0.0.0` refuses a server without auth; an image's auth is in
    LANGGRAPH_AUTH, with no langgraph.json."""
    monkeypatch.chdir(tmp_path)
    environ = {
        "LANGSERVE_GRAPHS": json.dumps({"agent": "/deps/app/agent.py:graph"}),
        "LANGGRAPH_AUTH": json.dumps({"path": "/deps/app/auth.py:auth"}),
    }
    assert declared_auth(None, environ) == "/deps/app/auth.py:auth"
    assert declared_auth(None, {"LANGSERVE_GRAPHS": environ["LANGSERVE_GRAPHS"]}) is None
