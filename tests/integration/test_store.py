"""The long-term store through langgraph-sdk: items, search, namespaces, TTLs, graphs using it."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from langgraph_sdk import get_client

from runyard.domain.errors import ConfigError
from runyard.longterm_store.store import store_options
from runyard.project.config import load_config
from tests.graphs.memory import toy_embed
from tests.support.databases import create_migrated_database, drop_database
from tests.support.runs import status_error
from tests.support.server import ServerProcess

Sdk = Any


def space(*labels: str) -> list[str]:
    """A namespace under a root label no other test uses."""
    return [f"t{uuid.uuid4().hex[:12]}", *labels]


def parse_time(value: str) -> datetime:
    """An ISO 8601 timestamp, which must carry a zero UTC offset."""
    parsed = datetime.fromisoformat(value)
    offset = parsed.utcoffset()
    assert offset is not None and offset.total_seconds() == 0, value
    return parsed


def store_sql(server: ServerProcess, sqlite_sql: str, postgres_sql: str, *params: Any) -> Any:
    """Run one statement on the server's store table (its own file in dev mode); first row."""
    if server.mode == "dev":
        path = server.workdir / "data" / "store.sqlite"
        with sqlite3.connect(path, timeout=30) as conn:
            return conn.execute(sqlite_sql, params).fetchone()
    with psycopg.connect(server.env["DATABASE_URL"], autocommit=True) as pg:
        cursor = pg.execute(postgres_sql, params)  # type: ignore[arg-type]
        return cursor.fetchone() if cursor.description is not None else None


def seconds_left(server: ServerProcess, namespace: list[str], key: str) -> float | None:
    """Seconds until the item expires by the database clock; None when it has no TTL."""
    row = store_sql(
        server,
        "SELECT (julianday(expires_at) - julianday('now')) * 86400 FROM store "
        "WHERE prefix = ? AND key = ?",
        "SELECT extract(epoch FROM expires_at - now()) FROM store WHERE prefix = %s AND key = %s",
        ".".join(namespace),
        key,
    )
    assert row is not None, f"{namespace}/{key} is not in the store table"
    return None if row[0] is None else float(row[0])


def expire_in(server: ServerProcess, namespace: list[str], key: str, seconds: int) -> None:
    """Move an item's expiry to `seconds` from now, as if time had passed."""
    store_sql(
        server,
        "UPDATE store SET expires_at = datetime('now', ? || ' seconds') "
        "WHERE prefix = ? AND key = ?",
        "UPDATE store SET expires_at = now() + make_interval(secs => %s) "
        "WHERE prefix = %s AND key = %s",
        seconds,
        ".".join(namespace),
        key,
    )


async def eventually(check: Callable[[], Any], timeout: float, what: str) -> Any:
    """Poll an async check until it returns a truthy value; fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = await check()
        if result:
            return result
        await asyncio.sleep(0.1)
    pytest.fail(f"timed out after {timeout:g} s waiting for {what}")


# --- items -------------------------------------------------------------------------------------


async def test_put_then_get_returns_the_item(client: Sdk) -> None:
    namespace = space("users", "u1")
    await client.store.put_item(namespace, "prefs", {"theme": "dark", "size": 3})
    item = await client.store.get_item(namespace, "prefs")
    assert set(item) == {"namespace", "key", "value", "created_at", "updated_at"}
    assert item["namespace"] == namespace
    assert item["key"] == "prefs"
    assert item["value"] == {"theme": "dark", "size": 3}
    assert parse_time(item["created_at"]) <= parse_time(item["updated_at"])


async def test_put_again_replaces_the_value(client: Sdk) -> None:
    namespace = space("docs")
    await client.store.put_item(namespace, "d", {"v": 1, "old": True})
    first = await client.store.get_item(namespace, "d")
    await asyncio.sleep(1.1)  # the SQLite store stamps whole seconds
    await client.store.put_item(namespace, "d", {"v": 2})
    second = await client.store.get_item(namespace, "d")
    assert second["value"] == {"v": 2}
    assert parse_time(second["updated_at"]) > parse_time(first["updated_at"])


async def test_get_missing_item_is_null(client: Sdk) -> None:
    assert await client.store.get_item(space("nothing"), "here") is None


async def test_delete_removes_the_item_and_is_idempotent(client: Sdk) -> None:
    namespace = space("tmp")
    await client.store.put_item(namespace, "k", {"x": 1})
    await client.store.delete_item(namespace, "k")
    assert await client.store.get_item(namespace, "k") is None
    await client.store.delete_item(namespace, "k")  # deleting nothing is fine


async def test_items_are_kept_per_namespace_and_key(client: Sdk) -> None:
    root = space()
    await client.store.put_item([*root, "a"], "k", {"where": "a"})
    await client.store.put_item([*root, "b"], "k", {"where": "b"})
    await client.store.put_item([*root, "a"], "other", {"where": "a-other"})
    assert (await client.store.get_item([*root, "a"], "k"))["value"] == {"where": "a"}
    assert (await client.store.get_item([*root, "b"], "k"))["value"] == {"where": "b"}


async def test_get_accepts_the_namespace_as_repeated_query_params(base_url: str) -> None:
    namespace = space("raw")
    async with httpx.AsyncClient(base_url=base_url) as http:
        put = await http.put("/store/items", json={"namespace": namespace, "key": "k", "value": {}})
        assert put.status_code == 204
        response = await http.get(
            "/store/items", params=[("namespace", label) for label in namespace] + [("key", "k")]
        )
    assert response.status_code == 200
    assert response.json()["namespace"] == namespace


@pytest.mark.parametrize(
    "namespace",
    [[], ["ok", ""], ["has.period"], ["langgraph", "reserved"]],
    ids=["empty", "empty-label", "period", "reserved-root"],
)
async def test_bad_namespaces_are_422(base_url: str, namespace: list[str]) -> None:
    async with httpx.AsyncClient(base_url=base_url) as http:
        response = await http.put(
            "/store/items", json={"namespace": namespace, "key": "k", "value": {"x": 1}}
        )
    assert response.status_code == 422, response.text
    assert "namespace" in response.json()["detail"].lower()


async def test_value_must_be_an_object_and_ttl_positive(base_url: str) -> None:
    async with httpx.AsyncClient(base_url=base_url) as http:
        not_object = await http.put(
            "/store/items", json={"namespace": space(), "key": "k", "value": [1, 2]}
        )
        zero_ttl = await http.put(
            "/store/items", json={"namespace": space(), "key": "k", "value": {}, "ttl": 0}
        )
        no_key = await http.get("/store/items", params={"namespace": "a.b"})
    assert not_object.status_code == 422
    assert "value" in not_object.json()["detail"]
    assert zero_ttl.status_code == 422
    assert "ttl" in zero_ttl.json()["detail"]
    assert no_key.status_code == 422
    assert "key" in no_key.json()["detail"]


# --- search ------------------------------------------------------------------------------------


async def test_search_lists_items_under_a_prefix(client: Sdk) -> None:
    root = space()
    await client.store.put_item([*root, "docs"], "a", {"kind": "note", "n": 1})
    await client.store.put_item([*root, "docs", "deep"], "b", {"kind": "task", "n": 2})
    await client.store.put_item([*root, "other"], "c", {"kind": "note", "n": 3})
    await client.store.put_item(space("elsewhere"), "z", {"kind": "note"})

    found = (await client.store.search_items(root))["items"]
    assert sorted(item["key"] for item in found) == ["a", "b", "c"]
    assert all("score" in item for item in found)

    docs = (await client.store.search_items([*root, "docs"]))["items"]
    assert sorted(item["key"] for item in docs) == ["a", "b"]
    assert {tuple(item["namespace"]) for item in docs} == {
        (*root, "docs"),
        (*root, "docs", "deep"),
    }


async def test_search_filters_on_values(client: Sdk) -> None:
    root = space()
    for index, kind in enumerate(["note", "task", "note"]):
        await client.store.put_item(root, f"k{index}", {"kind": kind, "n": index})
    notes = (await client.store.search_items(root, filter={"kind": "note"}))["items"]
    assert sorted(item["key"] for item in notes) == ["k0", "k2"]
    both = (await client.store.search_items(root, filter={"kind": "note", "n": 2}))["items"]
    assert [item["key"] for item in both] == ["k2"]


async def test_search_pages_with_limit_and_offset(client: Sdk) -> None:
    root = space()
    for index in range(5):
        await client.store.put_item(root, f"k{index}", {"n": index})
    first = (await client.store.search_items(root, limit=2))["items"]
    second = (await client.store.search_items(root, limit=2, offset=2))["items"]
    rest = (await client.store.search_items(root, limit=10, offset=4))["items"]
    keys = [item["key"] for item in first + second + rest]
    assert len(first) == 2 and len(second) == 2 and len(rest) == 1
    assert sorted(keys) == [f"k{i}" for i in range(5)]


async def test_a_query_without_an_index_ranks_nothing_as_on_langgraphs_server(
    client: Sdk,
) -> None:
    """langgraph-api 0.16.7 (langgraph dev, no store.index) answers 200: the items as
    without `query`, each with `score: null`."""
    root = space()
    await client.store.put_item(root, "k", {"text": "dogs"})
    found = (await client.store.search_items(root, query="cats"))["items"]
    assert [(item["key"], item["score"]) for item in found] == [("k", None)]
    assert found == (await client.store.search_items(root))["items"]


async def test_search_with_an_unknown_filter_operator_is_422(client: Sdk) -> None:
    root = space()
    await client.store.put_item(root, "k", {"n": 1})
    status, detail = await status_error(
        client.store.search_items(root, filter={"n": {"$bogus": 1}})
    )
    assert status == 422, detail
    assert "$bogus" in detail


# --- namespaces --------------------------------------------------------------------------------


async def test_list_namespaces_by_prefix_suffix_and_depth(client: Sdk) -> None:
    root = space()
    for labels in (["x", "1"], ["x", "2"], ["y"]):
        await client.store.put_item([*root, *labels], "k", {})

    found = (await client.store.list_namespaces(prefix=root))["namespaces"]
    assert sorted(found) == [[*root, "x", "1"], [*root, "x", "2"], [*root, "y"]]

    shallow = (await client.store.list_namespaces(prefix=root, max_depth=2))["namespaces"]
    assert sorted(shallow) == [[*root, "x"], [*root, "y"]]

    ending = (await client.store.list_namespaces(prefix=root, suffix=["1"]))["namespaces"]
    assert ending == [[*root, "x", "1"]]

    page = (await client.store.list_namespaces(prefix=root, limit=2))["namespaces"]
    rest = (await client.store.list_namespaces(prefix=root, limit=2, offset=2))["namespaces"]
    assert len(page) == 2 and len(rest) == 1
    assert sorted(page + rest) == sorted(found)


# --- TTL ---------------------------------------------------------------------------------------


async def test_ttl_sets_an_expiry_in_minutes(client: Sdk, server: ServerProcess) -> None:
    namespace = space("ttl")
    await client.store.put_item(namespace, "short", {"x": 1}, ttl=1)
    await client.store.put_item(namespace, "forever", {"x": 2})
    left = seconds_left(server, namespace, "short")
    assert left is not None and 50 < left <= 61, left
    assert seconds_left(server, namespace, "forever") is None


async def test_reading_refreshes_the_ttl_unless_told_not_to(
    client: Sdk, server: ServerProcess
) -> None:
    namespace = space("ttl")
    await client.store.put_item(namespace, "k", {"x": 1}, ttl=1)

    expire_in(server, namespace, "k", 20)
    await client.store.get_item(namespace, "k", refresh_ttl=False)
    left = seconds_left(server, namespace, "k")
    assert left is not None and left < 25, f"refresh_ttl=False refreshed it: {left}"

    await client.store.get_item(namespace, "k")  # refresh on read is the default
    left = seconds_left(server, namespace, "k")
    assert left is not None and left > 50, f"get did not refresh the TTL: {left}"

    expire_in(server, namespace, "k", 20)
    await client.store.search_items(namespace, refresh_ttl=True)
    left = seconds_left(server, namespace, "k")
    assert left is not None and left > 50, f"search did not refresh the TTL: {left}"


async def test_expired_items_disappear(client: Sdk, server: ServerProcess) -> None:
    namespace = space("ttl")
    await client.store.put_item(namespace, "gone", {"x": 1}, ttl=1)
    await client.store.put_item(namespace, "kept", {"x": 2})
    expire_in(server, namespace, "gone", -1)

    async def vanished() -> bool:
        return await client.store.get_item(namespace, "gone", refresh_ttl=False) is None

    await eventually(vanished, 10, "the expired item to disappear")
    keys = [item["key"] for item in (await client.store.search_items(namespace))["items"]]
    assert keys == ["kept"]


# --- graphs share the store --------------------------------------------------------------------


async def test_a_node_writes_memory_the_api_reads(client: Sdk) -> None:
    namespace = space("memories")
    result = await client.runs.wait(
        None,
        "memory",
        input={"namespace": namespace, "key": "fact", "write": {"likes": "tea"}},
    )
    assert result["found"] == {"likes": "tea"}  # the node read its own write back
    item = await client.store.get_item(namespace, "fact")
    assert item is not None and item["value"] == {"likes": "tea"}


async def test_the_api_writes_memory_a_node_reads(client: Sdk) -> None:
    namespace = space("memories")
    await client.store.put_item(namespace, "fact", {"likes": "coffee"})
    result = await client.runs.wait(
        None, "memory", input={"namespace": namespace, "key": "fact", "write": None}
    )
    assert result["found"] == {"likes": "coffee"}
    missing = await client.runs.wait(
        None, "memory", input={"namespace": namespace, "key": "absent", "write": None}
    )
    assert missing["found"] is None


# --- semantic search (store.index in langgraph.json) -------------------------------------------

MEMORY_GRAPH = Path(__file__).resolve().parents[1] / "graphs" / "memory.py"


def vector_support(backend: str, database_url: str | None) -> bool:
    """Whether this machine's backend can hold vectors: pgvector on PostgreSQL; always in dev
    mode (sqlite-vec, or exact cosine ranking where it cannot be loaded)."""
    if backend == "sqlite":
        return True
    assert database_url is not None
    with psycopg.connect(database_url) as pg:
        row = pg.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'").fetchone()
    return row is not None


@pytest.fixture(params=["sqlite", "postgres"])
def semantic_server(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[tuple[ServerProcess, bool]]:
    """An unstarted server whose langgraph.json configures a toy embedding, and whether the
    backend supports vectors here."""
    config = tmp_path / "langgraph.json"
    config.write_text(
        json.dumps(
            {
                "graphs": {"memory": f"{MEMORY_GRAPH}:graph"},
                "store": {
                    "index": {"embed": f"{MEMORY_GRAPH}:toy_embed", "dims": 8, "fields": ["text"]}
                },
            }
        )
    )
    url = None
    env = {"REDIS_URL": ""}
    if request.param == "postgres":
        url = create_migrated_database()
        env["DATABASE_URL"] = url
    mode = "dev" if request.param == "sqlite" else "serve"
    server = ServerProcess(mode, tmp_path / "server", env=env, config=config)
    try:
        yield server, vector_support(request.param, url)
    finally:
        server.stop()
        if url is not None:
            drop_database(url)


@pytest.mark.timeout(90)
async def test_configured_semantic_search_ranks_by_meaning(
    semantic_server: tuple[ServerProcess, bool],
) -> None:
    server, supported = semantic_server
    if not supported:
        with pytest.raises(RuntimeError) as caught:
            server.start()
        message = str(caught.value)
        assert "store.index" in message
        assert "pgvector" in message
        pytest.skip("pgvector is not installed on this PostgreSQL: semantic search not tested")
    server.start()
    client = get_client(url=server.url, api_key=None)
    try:
        root = space()
        for key, text in (("t", "black tea"), ("c", "black coffee"), ("d", "red dogs")):
            await client.store.put_item(root, key, {"text": text})
        found = (await client.store.search_items(root, query="tea", limit=3))["items"]
        assert found[0]["key"] == "t"
        assert all(item["score"] is not None for item in found)
        assert found[0]["score"] > found[-1]["score"]
    finally:
        await client.http.client.aclose()


@pytest.mark.parametrize(
    ("store", "problem"),
    [
        ({"index": {"dims": 8}}, "needs 'embed' and 'dims'"),
        ({"index": {"embed": "nowhere.py:f", "dims": 8}}, "does not exist"),
        ({"index": {"embed": f"{MEMORY_GRAPH}:missing", "dims": 8}}, "no attribute 'missing'"),
        ({"index": {"embed": f"{MEMORY_GRAPH}:toy_embed", "dims": 0}}, "dims"),
        ({"ttl": {"sweep_interval_minutes": -1}}, "sweep_interval_minutes"),
        ({"path": "./store.py:make"}, "a store of your own"),
    ],
)
def test_bad_store_configs_name_the_key(
    tmp_path: Path, store: dict[str, Any], problem: str
) -> None:
    config = tmp_path / "langgraph.json"
    config.write_text(json.dumps({"graphs": {"memory": f"{MEMORY_GRAPH}:graph"}, "store": store}))
    with pytest.raises(ConfigError) as caught:
        store_options(load_config(config))
    assert problem in caught.value.message
    assert "store" in caught.value.message


def test_store_config_loads_the_embedding_function(tmp_path: Path) -> None:
    config = tmp_path / "langgraph.json"
    index = {"embed": f"{MEMORY_GRAPH}:toy_embed", "dims": 8, "fields": ["text"]}
    config.write_text(
        json.dumps({"graphs": {"memory": f"{MEMORY_GRAPH}:graph"}, "store": {"index": index}})
    )
    options = store_options(load_config(config))
    assert options.semantic and options.index is not None
    assert options.index["dims"] == 8 and options.index["fields"] == ["text"]
    assert options.index["embed"](["black tea"]) == toy_embed(["black tea"])
    assert options.ttl["refresh_on_read"] is True
