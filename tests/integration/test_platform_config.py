"""`langgraph.json` as a LangGraph Platform deployment writes it: every key of the official
schema, the `http` section (custom app, middleware order, route switches, mount prefix,
configurable headers), the user inside the graph and graphs declared by module path or
factory. Through the HTTP API with langgraph-sdk, on SQLite and PostgreSQL."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_client

from runyard.graphs.registry import default_assistant_id
from tests.integration.test_crons import EVERY_SECOND, eventually
from tests.support.databases import create_migrated_database, drop_database, postgres_available
from tests.support.runs import new_tag, status_error
from tests.support.server import ROOT, ServerProcess

PROJECT = ROOT / "tests" / "graphs" / "platform"
FULL_CONFIG = PROJECT / "langgraph.json"
MIDDLEWARE_FIRST = PROJECT / "langgraph_middleware_first.json"
PREFIX = "/my-api"
ANN = {"Authorization": "Bearer ann"}
Sdk = Any


def start_server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, config: Path
) -> Iterator[ServerProcess]:
    """`runyard dev` on SQLite or `runyard serve` on a fresh PostgreSQL database."""
    workdir: Path = tmp_path_factory.mktemp(f"platform-{request.param}")
    env: dict[str, str] = {}
    url = None
    if request.param == "postgres":
        if not postgres_available():
            pytest.fail("PostgreSQL is not reachable at 127.0.0.1:5432; start it (docs/testing.md)")
        url = create_migrated_database()
        env = {"DATABASE_URL": url, "REDIS_URL": ""}
    mode = "dev" if request.param == "sqlite" else "serve"
    proc = ServerProcess(mode, workdir, config=config, env=env)
    try:
        proc.start()
        yield proc
    finally:
        proc.stop()
        if url is not None:
            drop_database(url)


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def full(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    """A server for the project whose langgraph.json uses every key."""
    yield from start_server(request, tmp_path_factory, FULL_CONFIG)


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def middleware_first(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    """The same custom app with its middleware before authentication (the default)."""
    yield from start_server(request, tmp_path_factory, MIDDLEWARE_FIRST)


@pytest.fixture
async def ann(full: ServerProcess) -> AsyncIterator[Sdk]:
    """An SDK client of user `ann`, pointed at the mount prefix."""
    client = get_client(url=full.url + PREFIX, api_key=None, headers=ANN)
    try:
        yield client
    finally:
        await client.http.client.aclose()


# --- graphs declared by module path, factories, descriptions --------------------------------


async def test_the_description_reaches_the_default_assistant(ann: Sdk) -> None:
    assistant = await ann.assistants.get(default_assistant_id("who"))
    assert assistant["description"] == "Reports what each node sees"
    assert assistant["graph_id"] == "who"


async def test_every_node_sees_the_user_and_the_chosen_headers(ann: Sdk) -> None:
    ann.http.client.headers.update({"x-tenant": "t-1", "x-hidden": "secret"})
    thread = await ann.threads.create()
    result = await ann.runs.wait(thread["thread_id"], "who", input={})
    expected = {
        "identity": "ann",
        "identity_by_key": "ann",
        "user_id": "ann",
        "permissions": ["write", "read"],
        "x-tenant": "t-1",
        "x-hidden": None,
    }
    assert result["first"] == expected
    assert result["second"] == expected


async def test_a_client_cannot_pose_as_another_user(ann: Sdk) -> None:
    config = {"configurable": {"langgraph_auth_user_id": "bob", "langgraph_auth_user": "bob"}}
    result = await ann.runs.wait(None, "who", input={}, config=config)
    assert result["first"]["user_id"] == "ann"
    assert result["first"]["identity"] == "ann"


async def test_a_stateless_run_thread_carries_its_owner(ann: Sdk) -> None:
    tag = new_tag()
    result = await ann.runs.wait(None, "who", input={}, metadata=tag, on_completion="keep")
    assert result["first"]["identity"] == "ann"
    threads = await ann.threads.search(metadata=tag)
    assert len(threads) == 1
    assert threads[0]["metadata"]["owner"] == "ann"


async def test_cron_runs_act_for_the_cron_creator(ann: Sdk) -> None:
    thread = await ann.threads.create()
    cron = await ann.crons.create_for_thread(
        thread["thread_id"], "who", schedule=EVERY_SECOND, input={}
    )
    stateless = await ann.crons.create(
        "who", schedule=EVERY_SECOND, input={}, on_run_completed="keep"
    )
    try:

        async def values() -> Any:
            state = await ann.threads.get(thread["thread_id"])
            return (state.get("values") or {}).get("second")

        seen = await eventually(values, 30, "the thread cron's first run")
        assert seen["identity"] == "ann"
        assert seen["permissions"] == ["write", "read"]

        async def cron_thread() -> Any:
            found = await ann.threads.search(metadata={"cron_id": stateless["cron_id"]})
            done = [t for t in found if (t.get("values") or {}).get("second")]
            return done[0] if done else None

        made = await eventually(cron_thread, 30, "the stateless cron's first run")
        assert made["metadata"]["owner"] == "ann"
        assert made["values"]["second"]["user_id"] == "ann"
    finally:
        await ann.crons.delete(cron["cron_id"])
        await ann.crons.delete(stateless["cron_id"])


async def test_a_server_runtime_factory_is_built_for_the_run_and_its_user(ann: Sdk) -> None:
    result = await ann.runs.wait(None, "for_user", input={})
    assert result["built_for"] == "threads.create_run:ann"


async def test_a_context_manager_factory_lives_as_long_as_its_run(
    ann: Sdk, full: ServerProcess
) -> None:
    thread = await ann.threads.create()
    run = await ann.runs.create(thread["thread_id"], "managed", input={})
    await ann.runs.join(thread["thread_id"], run["run_id"])
    state = await ann.threads.get_state(thread["thread_id"])
    assert state["values"]["built_for"] == f"managed:{run['run_id']}"
    async with httpx.AsyncClient(base_url=full.url + PREFIX, headers=ANN) as http:
        events = (await http.get("/factory-events")).json()
    mine = [e for e in events if e.endswith(run["run_id"])]
    assert mine == [f"setup:{run['run_id']}", f"teardown:{run['run_id']}"]


# --- http: custom app, prefix, switches -------------------------------------------------------


async def test_custom_routes_are_served_beside_the_api_under_the_prefix(
    full: ServerProcess,
) -> None:
    async with httpx.AsyncClient(base_url=full.url) as http:
        hello = await http.get(PREFIX + "/hello", headers=ANN)
        assert hello.status_code == 200
        assert hello.json() == {"hello": "world", "user": "ann"}
        assert (await http.get(PREFIX + "/started", headers=ANN)).json() == {"started": "yes"}
        # The probes stay at the root; nothing else does.
        assert (await http.get("/ok")).status_code == 200
        assert (await http.get("/hello", headers=ANN)).status_code == 404
        assert (await http.post("/threads", json={}, headers=ANN)).status_code == 404
        assert (await http.post(PREFIX + "/threads", json={}, headers=ANN)).status_code == 200


async def test_bodies_are_json_on_the_api_and_as_declared_on_custom_routes(
    full: ServerProcess,
) -> None:
    form = {"Content-Type": "application/x-www-form-urlencoded", **ANN}
    async with httpx.AsyncClient(base_url=full.url + PREFIX) as http:
        custom = await http.post("/form", content=b"a=1&b=2", headers=form)
        assert custom.json() == {
            "content_type": "application/x-www-form-urlencoded",
            "body": "a=1&b=2",
        }
        thread = await http.post("/threads", content=b'{"metadata": {"k": 1}}', headers=form)
        assert thread.status_code == 200, thread.text
        assert thread.json()["metadata"]["k"] == 1
        refused = await http.patch("/threads/search", headers=ANN)
        assert refused.status_code == 405
        assert refused.headers["allow"] == "POST"


async def test_custom_routes_go_through_auth_when_asked(full: ServerProcess) -> None:
    async with httpx.AsyncClient(base_url=full.url + PREFIX) as http:
        refused = await http.get("/hello")
        assert refused.status_code == 401
        assert "token" in refused.json()["detail"]


async def test_auth_first_runs_authentication_before_the_apps_middleware(
    full: ServerProcess,
) -> None:
    async with httpx.AsyncClient(base_url=full.url + PREFIX) as http:
        api = await http.post("/threads/search", json={}, headers=ANN)
        assert api.status_code == 200
        assert api.headers["x-middleware-saw"] == "ann"
        refused = await http.post("/threads/search", json={})
        assert refused.status_code == 401
        assert "x-middleware-saw" not in refused.headers


async def test_middleware_first_runs_the_apps_middleware_before_authentication(
    middleware_first: ServerProcess,
) -> None:
    async with httpx.AsyncClient(base_url=middleware_first.url) as http:
        api = await http.post("/threads/search", json={}, headers=ANN)
        assert api.status_code == 200
        assert api.headers["x-middleware-saw"] == "-"
        refused = await http.post("/threads/search", json={})
        assert refused.status_code == 401
        assert refused.headers["x-middleware-saw"] == "-"
        # Custom routes are open without enable_custom_route_auth, and /info is theirs.
        assert (await http.get("/hello")).json() == {"hello": "world", "user": None}
        assert (await http.get("/info")).json() == {"custom": True}
        # Runyard's own, closed with auth configured and no RUNYARD_METRICS_TOKEN.
        assert (await http.get("/metrics")).status_code == 403


async def test_checkpointer_ttl_gives_new_threads_its_default_ttl(ann: Sdk) -> None:
    thread = await ann.threads.create()
    ttl = (await ann.threads.get(thread["thread_id"], include=["ttl"]))["ttl"]  # type: ignore[typeddict-item]
    assert ttl["strategy"] == "delete"
    assert ttl["ttl_minutes"] == 1440


async def test_disabled_assistants_and_runs_leave_threads_served(
    middleware_first: ServerProcess,
) -> None:
    async with httpx.AsyncClient(base_url=middleware_first.url, headers=ANN) as http:
        thread = (await http.post("/threads", json={})).json()
        assert (await http.get(f"/threads/{thread['thread_id']}")).status_code == 200
        assert (await http.post("/assistants/search", json={})).status_code == 404
        runs = f"/threads/{thread['thread_id']}/runs"
        assert (await http.post(runs, json={"assistant_id": "who"})).status_code == 404
        assert (await http.post("/runs/wait", json={"assistant_id": "who"})).status_code == 404
        assert (await http.post("/runs/crons/search", json={})).status_code == 404


async def test_disabled_route_groups_are_gone(full: ServerProcess, ann: Sdk) -> None:
    async with httpx.AsyncClient(base_url=full.url + PREFIX, headers=ANN) as http:
        store = await http.put("/store/items", json={"namespace": ["a"], "key": "k", "value": {}})
        assert store.status_code == 404
        assert (await http.get("/metrics")).status_code == 404
        assert (await http.get("/ok")).status_code == 200
        # disable_ui: no "UI not found for graph" answer, the route itself is gone.
        ui = await http.post("/ui/agent", json={"name": "weather"})
        assert ui.status_code == 404 and "UI not found" not in ui.text
        assert (await http.get("/ui/agent/entrypoint.js")).status_code == 404
        # /info, /docs and /openapi.json are now the custom app's own, if it has them.
        assert (await http.get("/info")).json() == {"custom": True}
    async with httpx.AsyncClient(base_url=full.url) as http:
        assert (await http.get("/metrics")).status_code == 404
    code, _ = await status_error(ann.store.put_item(["a"], "k", {"v": 1}))
    assert code == 404


async def test_disabled_webhooks_are_not_called(ann: Sdk, full: ServerProcess) -> None:
    thread = await ann.threads.create()
    run = await ann.runs.create(
        thread["thread_id"], "who", input={}, webhook="http://127.0.0.1:9/never"
    )
    await ann.runs.join(thread["thread_id"], run["run_id"])
    line = f"webhook_skipped run_id={run['run_id']} reason=disabled"

    async def logged() -> bool:
        return line in full.log_path.read_text()

    await eventually(logged, 10, "the skipped webhook in the log")
    assert f"webhook_failed run_id={run['run_id']}" not in full.log_path.read_text()


# --- keys Runyard does not implement ------------------------------------------------------------


def test_an_unsupported_key_stops_start_up_naming_it(tmp_path: Path) -> None:
    """One of them through a real start-up (the others: tests/unit/test_graph_config.py)."""
    key = "disable_persistence"
    config = tmp_path / "langgraph.json"
    raw = {
        "dependencies": [str(PROJECT)],
        "graphs": {"who": "platform_agent.graphs:who"},
        key: True,
    }
    config.write_text(json.dumps(raw))
    proc = ServerProcess("dev", tmp_path / "work", config=config)
    with pytest.raises(RuntimeError) as caught:
        proc.start()
    assert f"'{key}'" in str(caught.value)
    assert "not supported by Runyard" in str(caught.value)
    assert "Traceback" not in str(caught.value)


def test_an_http_app_that_is_not_an_app_stops_start_up(tmp_path: Path) -> None:
    (tmp_path / "notapp.py").write_text("app = 42\n")
    raw = {
        "dependencies": [str(PROJECT)],
        "graphs": {"who": "platform_agent.graphs:who"},
        "http": {"app": "./notapp.py:app"},
    }
    config = tmp_path / "langgraph.json"
    config.write_text(json.dumps(raw))
    with pytest.raises(RuntimeError) as caught:
        ServerProcess("dev", tmp_path / "work", config=config).start()
    assert "http.app" in str(caught.value)
    assert "Starlette or FastAPI application" in str(caught.value)
    assert "Traceback" not in str(caught.value)
