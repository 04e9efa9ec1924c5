"""Threads: create, get, patch, delete, search, count and copy, through langgraph-sdk and HTTP."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

import httpx
import pytest

from tests.support.runs import new_tag, status_error

# langgraph-sdk's TypedDicts lag the protocol (Thread has no `error` or `config`, checkpoints
# must name every key), so the tests read its answers as the plain JSON they are.
Sdk = Any

THREAD_KEYS = {
    "thread_id",
    "created_at",
    "updated_at",
    "state_updated_at",
    "metadata",
    "status",
    "config",
    "values",
    "interrupts",
    "error",
}


def parse_time(value: str) -> datetime:
    """An ISO 8601 timestamp, which must carry a UTC offset."""
    parsed = datetime.fromisoformat(value)
    offset = parsed.utcoffset()
    assert offset is not None and offset.total_seconds() == 0, value
    return parsed


async def tagged_threads(client: Sdk, count: int, **extra: Any) -> list[str]:
    """Create `count` threads sharing a fresh tag (plus `extra` metadata); their ids in order."""
    tag = new_tag()
    ids = []
    for index in range(count):
        thread = await client.threads.create(metadata={**tag, "index": index, **extra})
        ids.append(str(thread["thread_id"]))
    return ids


# --- create and get ----------------------------------------------------------------------------


async def test_create_answers_the_platform_thread_shape(client: Sdk) -> None:
    tag = new_tag()
    thread = await client.threads.create(metadata=tag)
    assert set(thread) == THREAD_KEYS
    uuid.UUID(str(thread["thread_id"]))
    assert thread["metadata"] == tag
    assert thread["status"] == "idle"
    assert thread["values"] is None
    assert thread["interrupts"] == {}
    assert thread["error"] is None
    assert thread["config"] == {}
    assert parse_time(str(thread["created_at"])) == parse_time(str(thread["updated_at"]))
    fetched = await client.threads.get(thread["thread_id"])
    assert fetched == thread


async def test_create_with_an_id_raises_or_returns_the_existing_one(
    client: Sdk,
) -> None:
    thread_id = str(uuid.uuid4())
    tag = new_tag()
    created = await client.threads.create(thread_id=thread_id, metadata=tag)
    assert created["thread_id"] == thread_id

    status, detail = await status_error(client.threads.create(thread_id=thread_id))
    assert status == 409
    assert thread_id in detail and "do_nothing" in detail

    again = await client.threads.create(
        thread_id=thread_id, metadata={"other": True}, if_exists="do_nothing"
    )
    assert again == created


async def test_graph_id_is_stored_in_metadata(client: Sdk, base_url: str) -> None:
    tag = new_tag()
    thread = await client.threads.create(metadata=tag, graph_id="pipeline")
    assert thread["metadata"] == {**tag, "graph_id": "pipeline"}
    async with httpx.AsyncClient(base_url=base_url) as http:
        raw = await http.post("/threads", json={"graph_id": "approval", "metadata": tag})
    assert raw.status_code == 200, raw.text
    assert raw.json()["metadata"] == {**tag, "graph_id": "approval"}


async def test_ttl_is_accepted(client: Sdk) -> None:
    thread = await client.threads.create(metadata=new_tag(), ttl=60)
    assert thread["status"] == "idle"
    updated = await client.threads.update(thread["thread_id"], metadata={"x": 1}, ttl=30)
    assert updated["metadata"]["x"] == 1


# A thread id nobody creates, the same in every process: parallel workers collect the same
# test ids.
NO_SUCH_THREAD = "5d1f0c2a-8e3b-4f6d-9a7c-2b4e6f8a0c1d"


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("POST", "/threads", {"metadata": "notadict"}),
        ("POST", "/threads", {"thread_id": "not-a-uuid"}),
        ("POST", "/threads", {"if_exists": "maybe"}),
        ("POST", "/threads", {"supersteps": [{"updates": [{"values": {}}]}]}),
        ("GET", "/threads/not-a-uuid", None),
        ("PATCH", f"/threads/{NO_SUCH_THREAD}", {"metadata": 3}),
        ("POST", "/threads/search", {"limit": 0}),
        ("POST", "/threads/search", {"offset": -1}),
        ("POST", "/threads/search", {"sort_by": "name"}),
        ("POST", "/threads/search", {"sort_order": "up"}),
        ("POST", "/threads/search", {"status": "sleeping"}),
        ("POST", "/threads/search", {"select": ["thread_id", "bogus"]}),
        ("POST", "/threads/search", {"extract": {"x": "runs.id"}}),
        ("POST", "/threads/search", {"ids": ["nope"]}),
        ("POST", "/threads/count", {"metadata": []}),
        ("POST", f"/threads/{NO_SUCH_THREAD}/history", {"limit": 0}),
        ("GET", f"/threads/{NO_SUCH_THREAD}/history?limit=abc", None),
        ("POST", f"/threads/{NO_SUCH_THREAD}/state", {"values": 3}),
        ("POST", f"/threads/{NO_SUCH_THREAD}/state/checkpoint", {}),
    ],
)
async def test_malformed_requests_are_422(
    base_url: str, method: str, path: str, body: dict[str, Any] | None
) -> None:
    async with httpx.AsyncClient(base_url=base_url) as http:
        response = await http.request(method, path, json=body)
    assert response.status_code == 422, response.text
    assert response.json()["detail"]


async def test_unknown_thread_is_404_everywhere(client: Sdk, base_url: str) -> None:
    missing = str(uuid.uuid4())
    calls = [
        client.threads.get(missing),
        client.threads.update(missing, metadata={"a": 1}),
        client.threads.delete(missing),
        client.threads.copy(missing),
        client.threads.get_state(missing),
        client.threads.get_state(missing, checkpoint_id=str(uuid.uuid4())),
        client.threads.get_state(missing, checkpoint={"checkpoint_id": str(uuid.uuid4())}),
        client.threads.update_state(missing, {"text": "x"}, as_node="tokenize"),
        client.threads.get_history(missing),
    ]
    for call in calls:
        status, detail = await status_error(call)
        assert status == 404
        assert missing in detail
    async with httpx.AsyncClient(base_url=base_url) as http:
        assert (await http.get(f"/threads/{missing}/history")).status_code == 404


# --- patch and delete --------------------------------------------------------------------------


async def test_patch_merges_top_level_metadata_keys(client: Sdk) -> None:
    tag = new_tag()
    thread = await client.threads.create(metadata={**tag, "a": 1, "nested": {"x": 1}})
    patched = await client.threads.update(
        thread["thread_id"], metadata={"nested": {"y": 2}, "c": None}
    )
    assert patched["metadata"] == {**tag, "a": 1, "nested": {"y": 2}, "c": None}
    assert patched["created_at"] == thread["created_at"]
    assert parse_time(str(patched["updated_at"])) >= parse_time(str(thread["updated_at"]))
    assert await client.threads.get(thread["thread_id"]) == patched

    minimal = await client.threads.update(
        thread["thread_id"], metadata={"d": 4}, return_minimal=True
    )
    assert minimal is None
    assert (await client.threads.get(thread["thread_id"]))["metadata"]["d"] == 4


async def test_delete_removes_the_thread(client: Sdk) -> None:
    thread = await client.threads.create(metadata=new_tag())
    await client.threads.delete(thread["thread_id"])
    assert (await status_error(client.threads.get(thread["thread_id"])))[0] == 404
    assert (await status_error(client.threads.delete(thread["thread_id"])))[0] == 404


# --- search and count --------------------------------------------------------------------------


async def test_search_and_count_filter_on_metadata_containment(client: Sdk) -> None:
    tag = new_tag()
    for kind in ("a", "a", "b"):
        await client.threads.create(metadata={**tag, "kind": kind, "flag": kind == "a"})
    assert len(await client.threads.search(metadata=tag, limit=10)) == 3
    found = await client.threads.search(metadata={**tag, "kind": "a"})
    assert [t["metadata"]["kind"] for t in found] == ["a", "a"]
    assert len(await client.threads.search(metadata={**tag, "flag": False})) == 1
    assert await client.threads.count(metadata=tag) == 3
    assert await client.threads.count(metadata={**tag, "kind": "b"}) == 1
    assert await client.threads.count(metadata={**tag, "kind": "c"}) == 0


async def test_search_sorts_and_pages(client: Sdk, base_url: str) -> None:
    ids = await tagged_threads(client, 5)
    tag = (await client.threads.get(ids[0]))["metadata"]["test_tag"]
    metadata = {"test_tag": tag}

    newest_first = await client.threads.search(metadata=metadata, limit=10)
    assert [t["thread_id"] for t in newest_first] == ids[::-1]

    pages = []
    for offset in (0, 2, 4):
        page = await client.threads.search(
            metadata=metadata, limit=2, offset=offset, sort_by="created_at", sort_order="asc"
        )
        pages += [t["thread_id"] for t in page]
    assert pages == ids

    by_id = await client.threads.search(
        metadata=metadata, sort_by="thread_id", sort_order="desc", limit=10
    )
    assert [t["thread_id"] for t in by_id] == sorted(ids, reverse=True)

    await client.threads.update(ids[1], metadata={"touched": True})
    by_update = await client.threads.search(metadata=metadata, sort_by="updated_at", limit=1)
    assert by_update[0]["thread_id"] == ids[1]

    async with httpx.AsyncClient(base_url=base_url) as http:
        first = await http.post("/threads/search", json={"metadata": metadata, "limit": 2})
        assert first.headers["x-pagination-next"] == "2"
        last = await http.post(
            "/threads/search", json={"metadata": metadata, "limit": 2, "offset": 4}
        )
        assert "x-pagination-next" not in last.headers
        assert last.headers["x-pagination-total"] == "5"


async def test_search_by_ids_status_values_with_select_and_extract(
    client: Sdk,
) -> None:
    tag = new_tag()
    plain = await client.threads.create(metadata=tag)
    stepped = await client.threads.create(metadata=tag, graph_id="pipeline")
    await client.threads.update_state(
        stepped["thread_id"], {"text": "one two three"}, as_node="tokenize"
    )

    by_ids = await client.threads.search(ids=[plain["thread_id"]], metadata=tag)
    assert [t["thread_id"] for t in by_ids] == [plain["thread_id"]]

    interrupted = await client.threads.search(metadata=tag, status="interrupted")
    assert [t["thread_id"] for t in interrupted] == [stepped["thread_id"]]
    assert await client.threads.count(metadata=tag, status="idle") == 1

    by_values = await client.threads.search(metadata=tag, values={"text": "one two three"})
    assert [t["thread_id"] for t in by_values] == [stepped["thread_id"]]
    assert await client.threads.count(values={"text": "no such text " + tag["test_tag"]}) == 0

    selected = await client.threads.search(
        metadata=tag, select=["thread_id", "status"], sort_by="created_at", sort_order="asc"
    )
    assert selected == [
        {"thread_id": plain["thread_id"], "status": "idle"},
        {"thread_id": stepped["thread_id"], "status": "interrupted"},
    ]

    extracted = await client.threads.search(
        ids=[stepped["thread_id"]],
        select=["thread_id"],
        extract={"text": "values.text", "graph": "metadata.graph_id", "gone": "values.x[3]"},
    )
    assert extracted[0]["extracted"] == {"text": "one two three", "graph": "pipeline", "gone": None}


# --- copy --------------------------------------------------------------------------------------


async def test_copy_keeps_metadata_state_and_history(client: Sdk) -> None:
    tag = new_tag()
    source = await client.threads.create(metadata=tag, graph_id="pipeline")
    await client.threads.update_state(source["thread_id"], {"text": "a b"}, as_node="tokenize")
    await client.threads.update_state(
        source["thread_id"], {"summary": "s", "steps": ["analyze"]}, as_node="analyze"
    )

    copy = await client.threads.copy(source["thread_id"])
    assert copy is not None
    assert copy["thread_id"] != source["thread_id"]
    assert copy["metadata"] == {**tag, "graph_id": "pipeline"}
    assert copy["status"] == "interrupted"
    assert copy["values"] == {"text": "a b", "steps": ["analyze"], "summary": "s"}

    original_state = await client.threads.get_state(source["thread_id"])
    copied_state = await client.threads.get_state(copy["thread_id"])
    assert copied_state["values"] == original_state["values"]
    assert copied_state["next"] == original_state["next"] == ["report"]
    assert copied_state["checkpoint"]["thread_id"] == copy["thread_id"]
    original_history = await client.threads.get_history(source["thread_id"])
    copied_history = await client.threads.get_history(copy["thread_id"])
    assert [s["values"] for s in copied_history] == [s["values"] for s in original_history]

    # The copy lives on its own: changing it leaves the source alone.
    await client.threads.update_state(copy["thread_id"], {"summary": "changed"}, as_node="report")
    assert (await client.threads.get_state(source["thread_id"]))["values"]["summary"] == "s"
    assert (await client.threads.get(copy["thread_id"]))["status"] == "idle"


async def test_copy_of_a_thread_without_state(client: Sdk) -> None:
    tag = new_tag()
    source = await client.threads.create(metadata=tag)
    copy = await client.threads.copy(source["thread_id"])
    assert copy is not None
    assert copy["metadata"] == tag
    assert copy["values"] is None and copy["status"] == "idle"
    assert await client.threads.count(metadata=tag) == 2
