"""Graph introspection behind the assistants' schemas and graph endpoints."""

from __future__ import annotations

import operator
import typing
from typing import Annotated, Any

import pytest
from langgraph.graph import END, START, StateGraph

from runyard.domain.errors import InvalidInputError
from runyard.graphs import introspection


class LegacyState(typing.TypedDict, total=False):
    """A typing.TypedDict state, which pydantic refuses to describe on Python 3.11."""

    text: str
    steps: Annotated[list[str], operator.add]


def _legacy_graph() -> Any:
    def node(state: LegacyState) -> dict[str, Any]:
        return {"steps": ["node"]}

    builder = StateGraph(LegacyState)
    builder.add_node("node", node)
    builder.add_edge(START, "node")
    builder.add_edge("node", END)
    return builder.compile()


@pytest.mark.parametrize(
    ("raw", "expected"),
    [(None, False), ("", False), ("false", False), ("true", True), ("True", True), ("2", 2)],
)
def test_parse_xray_accepts_booleans_and_depths(raw: str | None, expected: bool | int) -> None:
    assert introspection.parse_xray(raw) == expected


@pytest.mark.parametrize("raw", ["-1", "deep", "1.5"])
def test_parse_xray_refuses_anything_else(raw: str) -> None:
    with pytest.raises(InvalidInputError, match="xray"):
        introspection.parse_xray(raw)


def test_schemas_of_a_typing_typeddict_graph_are_rebuilt_from_its_channels() -> None:
    schemas = introspection.graph_schemas(_legacy_graph())
    assert schemas["input_schema"] is not None
    assert schemas["input_schema"]["title"] == "LegacyState"
    assert schemas["input_schema"]["properties"]["steps"]["items"] == {"type": "string"}
    assert set(schemas["output_schema"]["properties"]) == {"text", "steps"}  # type: ignore[index]
    assert set(schemas["state_schema"]["properties"]) == {"text", "steps"}  # type: ignore[index]
    assert schemas["config_schema"] == {}
    assert schemas["context_schema"] is None


def test_a_schema_that_cannot_be_derived_is_none() -> None:
    class Opaque:
        name = "opaque"

    schemas = introspection.graph_schemas(Opaque())
    assert schemas == dict.fromkeys(schemas, None)
    assert set(schemas) == {
        "input_schema",
        "output_schema",
        "state_schema",
        "config_schema",
        "context_schema",
    }
