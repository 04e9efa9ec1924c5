"""Generative UI on the genui test project (tests/projects/genui): `runyard build-ui`, the
`/ui` routes as LangGraph's server answers them, and `push_ui_message`/`delete_ui_message`
reaching clients on every stream, on `runyard dev` (SQLite) and `runyard serve` (PostgreSQL).

The UI is built once per module by `runyard build-ui`; the servers serve that build with
RUNYARD_UI_BUILD=false (building at start is covered by test_generative_ui_startup.py and the
browser test).
"""

from __future__ import annotations

import asyncio
import html
import json
import os
import re
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from langgraph_sdk import get_client
from langgraph_sdk.client import LangGraphClient

from tests.integration.test_thread_session import raw_events
from tests.support.backends import backend_server
from tests.support.server import ROOT

pytestmark = pytest.mark.timeout(180)
GENUI = ROOT / "tests" / "projects" / "genui"
CONFIG = GENUI / "langgraph.json"
AUTH_CONFIG = GENUI / "langgraph_auth.json"


def build_ui(output: Path) -> None:
    """`runyard build-ui` of the genui project into `output`."""
    done = subprocess.run(
        [sys.executable, "-m", "runyard.cli", "build-ui", "-c", str(CONFIG), "-o", str(output)],
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, "RUNYARD_DATA_DIR": str(output.parent / "data")},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"built the UI of agent into {output}" in done.stdout


@pytest.fixture(scope="module")
def ui_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The genui project's UI, built once for the module."""
    output = tmp_path_factory.mktemp("genui-build") / "ui"
    build_ui(output)
    return output


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def genui_url(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, ui_dir: Path
) -> Iterator[str]:
    """A server of the genui project serving the module's build."""
    env = {"RUNYARD_UI_BUILD": "false", "RUNYARD_UI_DIR": str(ui_dir)}
    workdir = tmp_path_factory.mktemp(f"genui-{request.param}")
    with backend_server(request.param, workdir, config=CONFIG, env=env) as server:
        yield server.url


@pytest.fixture
async def client(genui_url: str) -> AsyncIterator[LangGraphClient]:
    """An SDK client of the genui server."""
    lg = get_client(url=genui_url, api_key=None)
    try:
        yield lg
    finally:
        await lg.http.client.aclose()


def official_tags(schemas: dict[str, Any], graph_id: str, name: Any) -> str:
    """The body langgraph-api 0.16.7 (`langgraph_api/api/ui.py`, `handle_ui`) answers, built
    the way it builds it, from the same build's schemas.json."""
    result = []
    for filepath in schemas[graph_id]["assets"]:
        basename = os.path.basename(filepath)
        ext = os.path.splitext(basename)[1]
        valid_js_name = re.sub(r"[^a-zA-Z0-9]", "_", graph_id)
        asset_url = f"/ui/{quote(graph_id, safe='')}/{quote(basename, safe='')}"
        safe_asset_url = html.escape(asset_url, quote=True)
        if ext == ".css":
            result.append(f'<link rel="stylesheet" href="{safe_asset_url}" />')
        elif ext == ".js":
            safe_name = html.escape(json.dumps(name), quote=True)
            result.append(
                f'<script src="{safe_asset_url}" '
                f"onload='__LGUI_{valid_js_name}.render("
                f'{safe_name}, "{{{{shadowRootId}}}}")\'>'
                "</script>"
            )
    return "\n".join(result)


@pytest.mark.parametrize("name", ["weather", 'it\'s <b>"bold"</b> & ünïcode', 7])
def test_tags_answer_byte_for_byte_as_langgraph(genui_url: str, ui_dir: Path, name: Any) -> None:
    schemas = json.loads((ui_dir / "schemas.json").read_text())
    # The builder lists them in the order it wrote them, which varies; the tags follow it.
    assert sorted(schemas["agent"]["assets"]) == ["entrypoint.css", "entrypoint.js"]
    answer = httpx.post(f"{genui_url}/ui/agent", json={"name": name}, timeout=10)
    assert answer.status_code == 200
    assert answer.headers["content-type"] == "text/html"
    assert answer.content == official_tags(schemas, "agent", name).encode()
    # The name is a JSON argument inside an attribute: quotes and markup arrive escaped.
    assert "<b>" not in answer.text and "'s" not in answer.text


def test_unknown_graph_and_asset_answer_404s_in_json(genui_url: str) -> None:
    """A difference: LangGraph answers these 404s in plain text (`UI not found for graph
    'nope'` with no Content-Type, and Starlette's `Not Found`); Runyard answers every error
    as JSON, with the same words where LangGraph has some."""
    missing = httpx.post(f"{genui_url}/ui/nope", json={"name": "weather"}, timeout=10)
    assert missing.status_code == 404
    assert missing.json() == {"detail": "UI not found for graph 'nope'"}
    asset = httpx.get(f"{genui_url}/ui/agent/nope.js", timeout=10)
    assert asset.status_code == 404
    assert "nope.js" in asset.json()["detail"]
    # A difference: LangGraph answers a body without `name` with a 500 (KeyError); Runyard
    # with a 422 that names the field, as it answers every malformed body.
    no_name = httpx.post(f"{genui_url}/ui/agent", json={"component": "weather"}, timeout=10)
    assert no_name.status_code == 422 and "body.name" in no_name.json()["detail"]


def test_assets_are_the_build_with_content_types_and_etags(genui_url: str, ui_dir: Path) -> None:
    """The bytes and content types of LangGraph's StaticFiles mount. A difference: its ETag
    hashes the file's mtime and size, which differ between instances that built separately;
    Runyard's hashes the content, so every instance gives the same one."""
    for name, content_type in [
        ("entrypoint.js", "text/javascript; charset=utf-8"),
        ("entrypoint.css", "text/css; charset=utf-8"),
    ]:
        url = f"{genui_url}/ui/agent/{name}"
        first = httpx.get(url, timeout=10)
        assert first.status_code == 200
        assert first.content == (ui_dir / "public" / "agent" / name).read_bytes()
        assert first.headers["content-type"] == content_type
        etag = first.headers["etag"]
        again = httpx.get(url, headers={"If-None-Match": etag}, timeout=10)
        assert (again.status_code, again.content, again.headers["etag"]) == (304, b"", etag)
    assert b"__LGUI_agent" in httpx.get(f"{genui_url}/ui/agent/entrypoint.js", timeout=10).content


def ui_events(parts: list[Any]) -> tuple[list[Any], list[Any]]:
    """(the `custom` payloads, the `ui` of each `values` snapshot) of an SDK stream."""
    custom = [p.data for p in parts if p.event == "custom"]
    values = [p.data.get("ui", []) for p in parts if p.event == "values"]
    return custom, values


async def test_push_and_delete_reach_run_and_thread_streams(client: LangGraphClient) -> None:
    thread = await client.threads.create()
    parts = [
        part
        async for part in client.runs.stream(
            thread["thread_id"],
            "agent",
            input={"messages": [{"role": "human", "content": "weather in Lyon"}]},
            stream_mode=["values", "custom"],
        )
    ]
    custom, values = ui_events(parts)
    pushed = custom[0]
    assert pushed["type"] == "ui" and pushed["name"] == "weather"
    assert pushed["props"] == {"city": "Lyon", "temperature": 14, "condition": "sunny"}
    state = await client.threads.get_state(thread["thread_id"])
    reply = state["values"]["messages"][-1]
    assert pushed["metadata"]["message_id"] == reply["id"]
    assert values[0] == [] and values[-1] == [pushed]
    assert state["values"]["ui"] == [pushed]

    # A background run joined from its first event (as useStream rejoins after a reload).
    run = await client.runs.create(
        thread["thread_id"],
        "agent",
        input={"messages": [{"role": "human", "content": "forget the weather"}]},
        stream_mode=["values", "custom"],
    )
    joined = [
        part
        async for part in client.runs.join_stream(
            thread["thread_id"],
            run["run_id"],
            stream_mode=["values", "custom"],
            last_event_id="-1",
        )
    ]
    custom, values = ui_events(joined)
    assert custom == [{"type": "remove-ui", "id": pushed["id"]}]
    assert values[-1] == []
    assert (await client.threads.get_state(thread["thread_id"]))["values"]["ui"] == []


async def test_thread_stream_carries_ui_events(client: LangGraphClient) -> None:
    thread = await client.threads.create()
    thread_id = thread["thread_id"]

    async def follow() -> list[Any]:
        seen = []
        stream = await client.threads.join_stream(thread_id, stream_mode="run_modes")
        async for part in stream:
            seen.append(part)
            if part.event == "values" and part.data.get("ui"):
                break
        return seen

    reader = asyncio.create_task(follow())
    await asyncio.sleep(0.5)
    await client.runs.create(
        thread_id,
        "agent",
        input={"messages": [{"role": "human", "content": "weather in Oslo"}]},
        stream_mode=["values", "custom"],
    )
    custom, values = ui_events(await asyncio.wait_for(reader, 60))
    assert custom[0]["props"]["city"] == "Oslo"
    assert values[-1] == [custom[0]]


@pytest.mark.parametrize("transport", ["sse", "websocket"])
async def test_thread_session_carries_ui_events(
    client: LangGraphClient, genui_url: str, transport: str
) -> None:
    async with client.threads.stream(assistant_id="agent", transport=transport) as thread:
        await thread.run.start(
            input={"messages": [{"role": "human", "content": "weather in Rome"}]}
        )
        output = await asyncio.wait_for(thread.output, 60)
        thread_id = thread.thread_id
    pushed = output["ui"][0]
    assert (pushed["name"], pushed["props"]["city"]) == ("weather", "Rome")

    def end(event: dict[str, Any]) -> bool:
        params = event.get("params") or {}
        return event.get("method") == "lifecycle" and params.get("data", {}).get("event") in (
            "completed",
            "failed",
        )

    body = {"channels": ["values", "custom", "lifecycle"]}
    events = await raw_events(genui_url, thread_id, transport, body, end)
    custom = [e["params"]["data"] for e in events if e["method"] == "custom"]
    assert custom == [pushed]
    values = [e["params"]["data"].get("ui") for e in events if e["method"] == "values"]
    assert values[-1] == [pushed]


def test_tags_need_auth_and_assets_do_not_as_on_langgraph(tmp_path: Path, ui_dir: Path) -> None:
    """LangGraph's auth middleware lets GET /ui/... through (a `<script src>` sends no
    credentials) and authenticates POST /ui/{graph_id} like any protected route."""
    env = {"RUNYARD_UI_BUILD": "false", "RUNYARD_UI_DIR": str(ui_dir)}
    with backend_server("sqlite", tmp_path, config=AUTH_CONFIG, env=env) as server:
        body = {"name": "weather"}
        refused = httpx.post(f"{server.url}/ui/agent", json=body, timeout=10)
        assert refused.status_code == 401
        allowed = httpx.post(
            f"{server.url}/ui/agent",
            json=body,
            headers={"Authorization": "Bearer user-a"},
            timeout=10,
        )
        assert allowed.status_code == 200 and "entrypoint.js" in allowed.text
        assert httpx.get(f"{server.url}/ui/agent/entrypoint.js", timeout=10).status_code == 200
