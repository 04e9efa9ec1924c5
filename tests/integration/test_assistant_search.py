"""Searching and counting assistants through langgraph-sdk: filters, pages, order, select."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
from langgraph_sdk.client import LangGraphClient

from runyard.graphs.registry import default_assistant_id
from tests.support.assistants import ASSISTANT_KEYS, http_error, new_tag


async def test_search_and_count_filter_on_metadata_graph_and_name(
    client: LangGraphClient,
) -> None:
    tag = new_tag()
    a = await client.assistants.create(
        "agent", metadata={**tag, "team": "red"}, name="Alpha Helper"
    )
    b = await client.assistants.create(
        "pipeline", metadata={**tag, "team": "red"}, name="beta helper"
    )
    c = await client.assistants.create("agent", metadata={**tag, "team": "blue"}, name="Gamma")

    def ids(rows: Any) -> set[str]:
        return {row["assistant_id"] for row in rows}

    everything = await client.assistants.search(metadata=tag, limit=100)
    assert ids(everything) == {a["assistant_id"], b["assistant_id"], c["assistant_id"]}
    assert all(set(row) == ASSISTANT_KEYS for row in everything)
    assert await client.assistants.count(metadata=tag) == 3

    red = {**tag, "team": "red"}
    assert ids(await client.assistants.search(metadata=red)) == {
        a["assistant_id"],
        b["assistant_id"],
    }
    assert await client.assistants.count(metadata=red) == 2
    assert ids(await client.assistants.search(metadata=tag, graph_id="agent")) == {
        a["assistant_id"],
        c["assistant_id"],
    }
    assert await client.assistants.count(metadata=tag, graph_id="pipeline") == 1
    # Name matches a case-insensitive part of the name.
    assert ids(await client.assistants.search(metadata=tag, name="HELPER")) == {
        a["assistant_id"],
        b["assistant_id"],
    }
    assert ids(await client.assistants.search(metadata=red, graph_id="agent", name="alpha")) == {
        a["assistant_id"]
    }
    assert await client.assistants.count(metadata=tag, name="%") == 0
    assert await client.assistants.search(metadata={**tag, "team": "green"}) == []

    # The default assistants carry created_by=system.
    system = await client.assistants.search(metadata={"created_by": "system"}, limit=100)
    assert default_assistant_id("pipeline") in ids(system)

    status, detail = await http_error(client.assistants.search(graph_id="no-such-graph"))
    assert status == 404 and "agent" in detail
    assert (await http_error(client.assistants.count(graph_id="no-such-graph")))[0] == 404


async def test_search_paginates_with_headers_and_sorts(
    client: LangGraphClient, base_url: str
) -> None:
    tag = new_tag()
    names = ["delta", "Alpha", "echo", "charlie", "Bravo"]
    for index, name in enumerate(names):
        await client.assistants.create(
            "agent" if index % 2 else "pipeline", metadata=tag, name=name
        )

    ascending = await client.assistants.search(
        metadata=tag, sort_by="name", sort_order="asc", limit=100
    )
    assert [row["name"] for row in ascending] == ["Alpha", "Bravo", "charlie", "delta", "echo"]
    descending = await client.assistants.search(
        metadata=tag, sort_by="name", sort_order="desc", limit=100
    )
    assert [row["name"] for row in descending] == ["echo", "delta", "charlie", "Bravo", "Alpha"]

    pages: list[str] = []
    cursors: list[str | None] = []
    for offset in (0, 2, 4):
        page = await client.assistants.search(
            metadata=tag,
            sort_by="name",
            sort_order="asc",
            limit=2,
            offset=offset,
            response_format="object",
        )
        pages.extend(row["name"] for row in page["assistants"])
        cursors.append(page["next"])
    assert pages == ["Alpha", "Bravo", "charlie", "delta", "echo"]
    assert cursors == ["2", "4", None]

    async with httpx.AsyncClient(base_url=base_url) as http:
        response = await http.post(
            "/assistants/search", json={"metadata": tag, "limit": 2, "offset": 2}
        )
    assert response.headers["x-pagination-total"] == "5"
    assert response.headers["x-pagination-next"] == "4"

    by_graph = await client.assistants.search(
        metadata=tag, sort_by="graph_id", sort_order="asc", limit=100
    )
    assert [row["graph_id"] for row in by_graph] == ["agent"] * 2 + ["pipeline"] * 3
    by_id = await client.assistants.search(
        metadata=tag, sort_by="assistant_id", sort_order="asc", limit=100
    )
    assert [row["assistant_id"] for row in by_id] == sorted(row["assistant_id"] for row in by_id)


async def test_search_sorts_by_time_newest_first_by_default(client: LangGraphClient) -> None:
    tag = new_tag()
    created = []
    for name in ("first", "second", "third"):
        created.append(await client.assistants.create("agent", metadata=tag, name=name))
        await asyncio.sleep(0.01)

    default = await client.assistants.search(metadata=tag)
    assert [row["name"] for row in default] == ["third", "second", "first"]
    oldest_first = await client.assistants.search(
        metadata=tag, sort_by="created_at", sort_order="asc"
    )
    assert [row["name"] for row in oldest_first] == ["first", "second", "third"]

    await client.assistants.update(created[0]["assistant_id"], description="touched")
    recently_updated = await client.assistants.search(
        metadata=tag, sort_by="updated_at", sort_order="desc"
    )
    assert [row["name"] for row in recently_updated] == ["first", "third", "second"]


async def test_search_select_returns_only_the_chosen_fields(
    client: LangGraphClient, base_url: str
) -> None:
    tag = new_tag()
    created = await client.assistants.create("agent", metadata=tag, name="picked")
    rows = await client.assistants.search(metadata=tag, select=["assistant_id", "name"])
    assert rows == [{"assistant_id": created["assistant_id"], "name": "picked"}]
    timed = await client.assistants.search(metadata=tag, select=["created_at", "metadata"])
    assert timed == [{"created_at": created["created_at"], "metadata": tag}]

    async with httpx.AsyncClient(base_url=base_url) as http:
        for body in (
            {"select": ["nope"]},
            {"limit": 0},
            {"limit": 1001},
            {"offset": -1},
            {"sort_by": "color"},
            {"sort_order": "sideways"},
            {"metadata": "x"},
        ):
            response = await http.post("/assistants/search", json=body)
            assert response.status_code == 422, (body, response.text)
        assert (await http.post("/assistants/count", json={"metadata": 3})).status_code == 422
        assert (await http.post("/assistants/search")).status_code == 200
