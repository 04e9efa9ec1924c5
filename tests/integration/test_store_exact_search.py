"""Semantic store search in `runyard dev` when sqlite-vec cannot be loaded: exact cosine
ranking over the stored vectors, the same results as LangGraph's InMemoryStore."""

from __future__ import annotations

import json
import sqlite3
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from langgraph.store.memory import InMemoryStore
from langgraph_sdk import get_client
from langgraph_sdk.client import LangGraphClient

from runyard.longterm_store.store import vector_extension_missing
from tests.graphs.embeddings import DIMS, embed
from tests.support.server import ServerProcess

EMBED = Path(__file__).resolve().parents[1] / "graphs" / "embeddings.py"
MEMORY_GRAPH = Path(__file__).resolve().parents[1] / "graphs" / "memory.py"
FIELDS = ["title", "tags[*]"]
ITEMS: dict[str, dict[str, Any]] = {
    "tea": {"title": "black tea with milk", "tags": ["drink", "warm"], "kind": "drink"},
    "coffee": {"title": "black coffee", "tags": ["drink", "bitter"], "kind": "drink"},
    "dogs": {"title": "red dogs running", "tags": ["animal"], "kind": "animal"},
    "cats": {"title": "black cats sleeping", "tags": ["animal", "night"], "kind": "animal"},
    "soup": {"title": "hot tomato soup", "tags": ["food", "hot"], "kind": "food"},
    "untitled": {"kind": "drink"},  # nothing to embed: unscored, after the ranked items
}
QUERIES: list[dict[str, Any]] = [
    {"query": "black tea", "limit": 10},
    {"query": "hot drink", "limit": 3},
    {"query": "sleeping animals", "limit": 2, "offset": 1},
    {"query": "black", "limit": 10, "filter": {"kind": "drink"}},
]


@pytest.fixture(scope="module")
def exact_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """`runyard dev` with store.index configured, on this machine's Python; the tests share
    it, each in a namespace of its own."""
    workdir = tmp_path_factory.mktemp("exact-search")
    config = workdir / "langgraph.json"
    index = {"embed": f"{EMBED}:embed", "dims": DIMS, "fields": FIELDS}
    config.write_text(
        json.dumps({"graphs": {"memory": f"{MEMORY_GRAPH}:graph"}, "store": {"index": index}})
    )
    server = ServerProcess("dev", workdir / "server", config=config).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
async def dev_client(exact_server: ServerProcess) -> AsyncIterator[LangGraphClient]:
    """An SDK client of that server."""
    client = get_client(url=exact_server.url, api_key=None)
    try:
        yield client
    finally:
        await client.http.client.aclose()


def reference(namespace: tuple[str, ...]) -> InMemoryStore:
    """LangGraph's in-memory store holding the same items, with the same embedding."""
    store = InMemoryStore(index={"embed": embed, "dims": DIMS, "fields": FIELDS})
    for key, value in ITEMS.items():
        store.put(namespace, key, value)
    return store


def test_this_machine_needs_the_fallback() -> None:
    """The case the fallback exists for; on a Python that loads sqlite-vec it is not used."""
    reason = vector_extension_missing()
    if hasattr(sqlite3.Connection, "enable_load_extension"):
        pytest.skip(f"this Python loads extensions (sqlite-vec: {reason or 'loads'})")
    assert reason == "this_python_sqlite3_cannot_load_extensions"


@pytest.mark.timeout(90)
async def test_search_matches_langgraphs_in_memory_store(dev_client: LangGraphClient) -> None:
    namespace = ("exact", uuid.uuid4().hex)
    for key, value in ITEMS.items():
        await dev_client.store.put_item(list(namespace), key, value)
    expected_store = reference(namespace)
    for query in QUERIES:
        found = (await dev_client.store.search_items(list(namespace), **query))["items"]
        expected = expected_store.search(namespace, **query)
        assert [item["key"] for item in found] == [item.key for item in expected], query
        for got, want in zip(found, expected, strict=True):
            if want.score is None:
                assert got["score"] is None
            else:
                assert got["score"] == pytest.approx(want.score, abs=1e-9)
    # A search without a query is unchanged: no scores.
    listed = (await dev_client.store.search_items(list(namespace), limit=10))["items"]
    assert {item["key"] for item in listed} == set(ITEMS)
    assert all(item.get("score") is None for item in listed)


@pytest.mark.timeout(90)
async def test_updates_and_deletes_change_the_ranking(dev_client: LangGraphClient) -> None:
    namespace = ["exact", uuid.uuid4().hex]
    await dev_client.store.put_item(namespace, "a", {"title": "green tea"})
    await dev_client.store.put_item(namespace, "b", {"title": "red wine"})
    first = (await dev_client.store.search_items(namespace, query="red wine", limit=1))["items"]
    assert first[0]["key"] == "b"
    await dev_client.store.put_item(namespace, "b", {"title": "green tea leaves"})
    await dev_client.store.put_item(namespace, "a", {"title": "red wine glass"})
    again = (await dev_client.store.search_items(namespace, query="red wine", limit=1))["items"]
    assert again[0]["key"] == "a"
    await dev_client.store.delete_item(namespace, "a")
    left = (await dev_client.store.search_items(namespace, query="red wine", limit=5))["items"]
    assert [item["key"] for item in left] == ["b"]
    # index=False: stored, never ranked.
    await dev_client.store.put_item(namespace, "c", {"title": "red wine"}, index=False)
    ranked = (await dev_client.store.search_items(namespace, query="red wine", limit=5))["items"]
    assert [(item["key"], item["score"] is None) for item in ranked] == [("b", False), ("c", True)]
