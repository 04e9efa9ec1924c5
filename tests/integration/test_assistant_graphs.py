"""What an assistant's graph looks like: schemas, drawable graph, subgraphs."""

from __future__ import annotations

from typing import Any

import httpx
from langgraph_sdk.client import LangGraphClient

from tests.support.assistants import SCHEMA_KEYS


async def test_schemas_come_from_the_compiled_graph(client: LangGraphClient) -> None:
    schemas: Any = await client.assistants.get_schemas("subgraph")
    assert set(schemas) == SCHEMA_KEYS | {"graph_id"}
    assert schemas["graph_id"] == "subgraph"
    assert schemas["input_schema"]["properties"]["steps"]["type"] == "array"
    assert "steps" in schemas["output_schema"]["properties"]
    assert "steps" in schemas["state_schema"]["properties"]
    assert schemas["context_schema"]["properties"]["greeting"]["type"] == "string"
    assert isinstance(schemas["config_schema"], dict)

    agent: Any = await client.assistants.get_schemas("agent")
    assert "messages" in agent["input_schema"]["properties"]
    assert "messages" in agent["state_schema"]["properties"]
    assert agent["context_schema"] is None

    # Example graphs use typing.TypedDict, which pydantic rejects on Python 3.11: the input
    # schema is then rebuilt from the graph's channels.
    pipeline: Any = await client.assistants.get_schemas("pipeline")
    assert {"text", "steps"} <= set(pipeline["input_schema"]["properties"])
    assert {"word_count", "summary"} <= set(pipeline["state_schema"]["properties"])


async def test_graph_is_drawn_with_subgraphs_to_the_xray_depth(
    client: LangGraphClient, base_url: str
) -> None:
    flat = await client.assistants.get_graph("subgraph")
    assert {node["id"] for node in flat["nodes"]} == {
        "__start__",
        "parent_start",
        "child",
        "parent_end",
        "__end__",
    }
    assert {(e["source"], e["target"]) for e in flat["edges"]} == {
        ("__start__", "parent_start"),
        ("parent_start", "child"),
        ("child", "parent_end"),
        ("parent_end", "__end__"),
    }
    assert all("id" not in (node.get("data") or {}) for node in flat["nodes"])

    one_level = {
        node["id"] for node in (await client.assistants.get_graph("subgraph", xray=1))["nodes"]
    }
    assert {"child:child_1", "child:inner", "child:child_2"} <= one_level
    assert "child:inner:leaf_1" not in one_level

    full = {
        node["id"] for node in (await client.assistants.get_graph("subgraph", xray=True))["nodes"]
    }
    assert {"child:child_1", "child:inner:leaf_1", "child:inner:leaf_2"} <= full
    assert "child" not in full

    async with httpx.AsyncClient(base_url=base_url) as http:
        for bad in ("-1", "deep"):
            response = await http.get("/assistants/subgraph/graph", params={"xray": bad})
            assert response.status_code == 422, response.text


async def test_subgraphs_are_listed_by_namespace(client: LangGraphClient) -> None:
    assert await client.assistants.get_subgraphs("agent") == {}

    direct: Any = await client.assistants.get_subgraphs("subgraph")
    assert set(direct) == {"child"}
    assert set(direct["child"]) == SCHEMA_KEYS
    assert "steps" in direct["child"]["state_schema"]["properties"]

    nested = await client.assistants.get_subgraphs("subgraph", recurse=True)
    assert set(nested) == {"child", "child|inner"}

    assert set(await client.assistants.get_subgraphs("subgraph", namespace="child")) == {"child"}
    inner = await client.assistants.get_subgraphs("subgraph", namespace="child|inner", recurse=True)
    assert set(inner) == {"child|inner"}
    assert await client.assistants.get_subgraphs("subgraph", namespace="nowhere") == {}


async def test_introspection_uses_the_assistant_graph(client: LangGraphClient) -> None:
    created = await client.assistants.create("subgraph", context={"greeting": "hi"})
    schemas = await client.assistants.get_schemas(created["assistant_id"])
    assert schemas["graph_id"] == "subgraph"
    graph = await client.assistants.get_graph(created["assistant_id"])
    assert "parent_start" in {node["id"] for node in graph["nodes"]}
    assert set(await client.assistants.get_subgraphs(created["assistant_id"])) == {"child"}
