"""The assistants API through langgraph-sdk: create, get, versions, delete."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_client
from langgraph_sdk.client import LangGraphClient

from runyard.graphs.registry import default_assistant_id
from tests.support.assistants import (
    ASSISTANT_KEYS,
    VERSION_KEYS,
    http_error,
    new_tag,
    parse_time,
)
from tests.support.backends import backend_server
from tests.support.server import ServerProcess

# --- create and get -------------------------------------------------------------------------


async def test_create_returns_the_langgraph_shape_and_get_returns_the_same(
    client: LangGraphClient,
) -> None:
    tag = new_tag()
    created = await client.assistants.create(
        "pipeline",
        config={"tags": ["t1"], "recursion_limit": 12},
        context={"mode": "fast"},
        metadata={**tag, "owner": "me"},
        name="my pipeline",
        description="counts words",
    )
    assert set(created) == ASSISTANT_KEYS
    assert created["graph_id"] == "pipeline"
    assert created["name"] == "my pipeline"
    assert created["description"] == "counts words"
    assert created["metadata"] == {**tag, "owner": "me"}
    assert created["context"] == {"mode": "fast"}
    # Context and configurable mirror each other, as on LangGraph Platform.
    assert created["config"] == {
        "tags": ["t1"],
        "recursion_limit": 12,
        "configurable": {"mode": "fast"},
    }
    assert created["version"] == 1
    assert uuid.UUID(created["assistant_id"])
    assert parse_time(created["created_at"]) == parse_time(created["updated_at"])

    fetched = await client.assistants.get(created["assistant_id"])
    assert fetched == created


async def test_create_defaults_and_configurable_becomes_context(client: LangGraphClient) -> None:
    bare = await client.assistants.create("agent")
    assert bare["name"] == "Untitled"
    assert bare["config"] == {}
    assert bare["context"] == {}
    assert bare["metadata"] == {}
    assert bare["description"] is None

    legacy = await client.assistants.create("agent", config={"configurable": {"model": "x"}})
    assert legacy["context"] == {"model": "x"}
    assert legacy["config"] == {"configurable": {"model": "x"}}


async def test_create_with_configurable_and_context_is_refused_without_a_trace(
    client: LangGraphClient,
) -> None:
    assistant_id = str(uuid.uuid4())
    status, detail = await http_error(
        client.assistants.create(
            "agent",
            config={"configurable": {"a": 1}},
            context={"a": 2},
            assistant_id=assistant_id,
        )
    )
    assert status == 422
    assert "context" in detail
    assert (await http_error(client.assistants.get(assistant_id)))[0] == 404


async def test_create_with_an_existing_id_raises_or_returns_the_existing_one(
    client: LangGraphClient,
) -> None:
    assistant_id = str(uuid.uuid4())
    first = await client.assistants.create("agent", assistant_id=assistant_id, name="first")
    assert first["assistant_id"] == assistant_id

    status, detail = await http_error(
        client.assistants.create("pipeline", assistant_id=assistant_id, name="second")
    )
    assert status == 409
    assert assistant_id in detail

    same = await client.assistants.create(
        "pipeline", assistant_id=assistant_id, name="second", if_exists="do_nothing"
    )
    assert same == first
    versions = await client.assistants.get_versions(assistant_id)
    assert [v["version"] for v in versions] == [1]


async def test_create_with_an_unknown_graph_is_404_naming_the_known_graphs(
    client: LangGraphClient,
) -> None:
    tag = new_tag()
    status, detail = await http_error(client.assistants.create("no-such-graph", metadata=tag))
    assert status == 404
    assert "no-such-graph" in detail
    for graph_id in ("agent", "pipeline", "approval"):
        assert graph_id in detail
    assert await client.assistants.count(metadata=tag) == 0


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"graph_id": None},
        {"graph_id": "agent", "config": {"tags": "not-a-list"}},
        {"graph_id": "agent", "config": "nope"},
        {"graph_id": "agent", "metadata": ["a"]},
        {"graph_id": "agent", "if_exists": "replace"},
        {"graph_id": "agent", "assistant_id": "not-a-uuid"},
    ],
)
async def test_create_with_a_malformed_body_is_422(base_url: str, body: dict[str, Any]) -> None:
    async with httpx.AsyncClient(base_url=base_url) as http:
        response = await http.post("/assistants", json=body)
    assert response.status_code == 422, response.text
    assert response.json()["detail"]


async def test_body_that_is_not_json_is_422(base_url: str) -> None:
    async with httpx.AsyncClient(base_url=base_url) as http:
        response = await http.post(
            "/assistants", content=b"{nope", headers={"content-type": "application/json"}
        )
    assert response.status_code == 422


async def test_a_graph_id_names_its_default_assistant(client: LangGraphClient) -> None:
    by_graph = await client.assistants.get("agent")
    assert by_graph["assistant_id"] == default_assistant_id("agent")
    assert by_graph["graph_id"] == "agent"
    assert by_graph["name"] == "agent"
    assert by_graph["metadata"] == {"created_by": "system"}
    assert set(by_graph) == ASSISTANT_KEYS
    assert await client.assistants.get(by_graph["assistant_id"]) == by_graph
    assert (await client.assistants.get_schemas("agent"))["graph_id"] == "agent"
    assert (await client.assistants.get_graph("agent"))["nodes"]
    assert (await client.assistants.get_versions("agent"))[0]["version"] >= 1


async def test_unknown_assistants_are_404_everywhere(client: LangGraphClient) -> None:
    missing = str(uuid.uuid4())
    calls = [
        client.assistants.get(missing),
        client.assistants.get("not-a-graph-nor-a-uuid"),
        client.assistants.update(missing, name="x"),
        client.assistants.delete(missing),
        client.assistants.get_versions(missing),
        client.assistants.set_latest(missing, 1),
        client.assistants.get_schemas(missing),
        client.assistants.get_graph(missing),
        client.assistants.get_subgraphs(missing),
    ]
    for call in calls:
        status, detail = await http_error(call)
        assert status == 404
        assert "not found" in detail


# --- versions ---------------------------------------------------------------------------------


async def test_patch_records_a_new_version_and_the_assistant_mirrors_it(
    client: LangGraphClient,
) -> None:
    tag = new_tag()
    created = await client.assistants.create(
        "pipeline", config={"tags": ["a"]}, metadata={**tag, "stage": "one"}, name="v1"
    )
    assistant_id = created["assistant_id"]
    await asyncio.sleep(0.01)

    second = await client.assistants.update(
        assistant_id, metadata={"stage": "two", "extra": True}, name="v2"
    )
    assert set(second) == ASSISTANT_KEYS
    assert second["version"] == 2
    assert second["name"] == "v2"
    # Metadata is merged into the current one; config is kept when not given.
    assert second["metadata"] == {**tag, "stage": "two", "extra": True}
    assert second["config"] == {"tags": ["a"]}
    assert second["created_at"] == created["created_at"]
    assert parse_time(second["updated_at"]) > parse_time(created["updated_at"])

    third = await client.assistants.update(
        assistant_id, config={"tags": ["b"]}, description="third", graph_id="approval"
    )
    assert third["version"] == 3
    assert third["graph_id"] == "approval"
    assert third["config"] == {"tags": ["b"]}
    assert third["description"] == "third"
    assert third["name"] == "v2"
    assert await client.assistants.get(assistant_id) == third

    versions = await client.assistants.get_versions(assistant_id)
    assert [v["version"] for v in versions] == [3, 2, 1]
    assert all(set(v) == VERSION_KEYS for v in versions)
    assert [v["name"] for v in versions] == ["v2", "v2", "v1"]
    assert [v["graph_id"] for v in versions] == ["approval", "pipeline", "pipeline"]
    assert versions[2]["metadata"] == {**tag, "stage": "one"}
    assert versions[0]["created_at"] == third["updated_at"]

    assert [v["version"] for v in await client.assistants.get_versions(assistant_id, limit=1)] == [
        3
    ]
    page = await client.assistants.get_versions(assistant_id, limit=2, offset=1)
    assert [v["version"] for v in page] == [2, 1]
    filtered = await client.assistants.get_versions(assistant_id, metadata={"stage": "two"})
    assert [v["version"] for v in filtered] == [3, 2]
    assert await client.assistants.get_versions(assistant_id, metadata={"stage": "nine"}) == []


async def test_patch_with_context_updates_configurable_and_keeps_other_config(
    client: LangGraphClient,
) -> None:
    created = await client.assistants.create("agent", config={"tags": ["keep"]})
    patched = await client.assistants.update(created["assistant_id"], context={"tone": "dry"})
    assert patched["context"] == {"tone": "dry"}
    assert patched["config"] == {"tags": ["keep"], "configurable": {"tone": "dry"}}


async def test_patch_with_an_unknown_graph_is_404_and_writes_nothing(
    client: LangGraphClient,
) -> None:
    created = await client.assistants.create("agent", name="stays")
    status, detail = await http_error(
        client.assistants.update(created["assistant_id"], graph_id="no-such-graph", name="x")
    )
    assert status == 404
    assert "no-such-graph" in detail and "agent" in detail
    assert await client.assistants.get(created["assistant_id"]) == created
    assert len(await client.assistants.get_versions(created["assistant_id"])) == 1


async def test_patch_with_a_malformed_body_is_422(client: LangGraphClient, base_url: str) -> None:
    created = await client.assistants.create("agent")
    async with httpx.AsyncClient(base_url=base_url) as http:
        for body in ({"config": {"recursion_limit": "many"}}, {"metadata": "x"}, {"name": 3}):
            response = await http.patch(f"/assistants/{created['assistant_id']}", json=body)
            assert response.status_code == 422, (body, response.text)
    assert (await client.assistants.get(created["assistant_id"]))["version"] == 1


async def test_set_latest_makes_an_old_version_current_and_keeps_history(
    client: LangGraphClient,
) -> None:
    created = await client.assistants.create(
        "pipeline", metadata={"n": 1}, name="one", config={"tags": ["one"]}
    )
    assistant_id = created["assistant_id"]
    await client.assistants.update(
        assistant_id, metadata={"n": 2}, name="two", config={"tags": ["two"]}, graph_id="agent"
    )
    await client.assistants.update(assistant_id, metadata={"n": 3}, name="three")

    back = await client.assistants.set_latest(assistant_id, 1)
    assert set(back) == ASSISTANT_KEYS
    assert back["version"] == 1
    assert back["name"] == "one"
    assert back["graph_id"] == "pipeline"
    assert back["metadata"] == {"n": 1}
    assert back["config"] == {"tags": ["one"]}
    assert back["created_at"] == created["created_at"]
    assert await client.assistants.get(assistant_id) == back
    assert [v["version"] for v in await client.assistants.get_versions(assistant_id)] == [3, 2, 1]

    # The next change builds on the current version and takes the next free number.
    after = await client.assistants.update(assistant_id, metadata={"m": True})
    assert after["version"] == 4
    assert after["name"] == "one"
    assert after["metadata"] == {"n": 1, "m": True}

    forward = await client.assistants.set_latest(assistant_id, 3)
    assert (forward["version"], forward["name"], forward["graph_id"]) == (3, "three", "agent")

    status, detail = await http_error(client.assistants.set_latest(assistant_id, 99))
    assert status == 404
    assert "99" in detail
    assert (await client.assistants.get(assistant_id))["version"] == 3


async def test_concurrent_patches_get_distinct_versions(client: LangGraphClient) -> None:
    created = await client.assistants.create("agent")
    assistant_id = created["assistant_id"]
    results = await asyncio.gather(
        *(client.assistants.update(assistant_id, metadata={f"k{i}": i}) for i in range(6))
    )
    assert sorted(r["version"] for r in results) == [2, 3, 4, 5, 6, 7]
    final = await client.assistants.get(assistant_id)
    assert final["version"] == 7
    assert final["metadata"] == {f"k{i}": i for i in range(6)}
    versions = await client.assistants.get_versions(assistant_id, limit=100)
    assert [v["version"] for v in versions] == [7, 6, 5, 4, 3, 2, 1]


# --- delete -----------------------------------------------------------------------------------


async def test_delete_removes_the_assistant_and_its_versions(client: LangGraphClient) -> None:
    tag = new_tag()
    created = await client.assistants.create("agent", metadata=tag)
    await client.assistants.update(created["assistant_id"], name="later")
    await client.assistants.delete(created["assistant_id"])
    assert (await http_error(client.assistants.get(created["assistant_id"])))[0] == 404
    assert (await http_error(client.assistants.get_versions(created["assistant_id"])))[0] == 404
    assert (await http_error(client.assistants.delete(created["assistant_id"])))[0] == 404
    assert await client.assistants.count(metadata=tag) == 0


# --- default assistants on a server of their own -----------------------------------------------


@pytest.fixture
def own_server(server: ServerProcess, tmp_path: Path) -> Iterator[ServerProcess]:
    """A server of the same backend as `server`, with its own database, for destructive tests."""
    with backend_server(server.backend, tmp_path / "own") as proc:
        yield proc


@pytest.fixture
async def own_client(own_server: ServerProcess) -> AsyncIterator[LangGraphClient]:
    """A langgraph-sdk client for `own_server`."""
    lg = get_client(url=own_server.url, api_key=None)
    try:
        yield lg
    finally:
        await lg.http.client.aclose()


async def test_deleting_a_default_assistant_is_allowed_and_it_returns_at_restart(
    own_server: ServerProcess, own_client: LangGraphClient
) -> None:
    default_id = default_assistant_id("agent")
    await own_client.assistants.update("agent", name="renamed default")
    await own_client.assistants.delete("agent")

    assert (await http_error(own_client.assistants.get(default_id)))[0] == 404
    assert (await http_error(own_client.assistants.get("agent")))[0] == 404
    assert await own_client.assistants.count(graph_id="agent") == 0
    # Other graphs and new assistants of the same graph are unaffected.
    assert (await own_client.assistants.get("pipeline"))["graph_id"] == "pipeline"
    custom = await own_client.assistants.create("agent", name="mine")
    assert (await own_client.assistants.get_graph(custom["assistant_id"]))["nodes"]

    own_server.stop()
    restarted = ServerProcess(own_server.mode, own_server.workdir, env=own_server.env).start()
    lg = get_client(url=restarted.url, api_key=None)
    try:
        back = await lg.assistants.get("agent")
        assert back["assistant_id"] == default_id
        assert (back["name"], back["version"]) == ("agent", 1)
        assert back["metadata"] == {"created_by": "system"}
        assert [v["version"] for v in await lg.assistants.get_versions("agent")] == [1]
        assert (await lg.assistants.get(custom["assistant_id"]))["name"] == "mine"
    finally:
        await lg.http.client.aclose()
        restarted.stop()
