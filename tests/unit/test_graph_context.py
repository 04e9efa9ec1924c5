"""The context a run's graph receives, from its `context_schema` and the run's values.

Reference: `langgraph dev` (langgraph-api 0.16.7) run side by side on the same graphs, with
`/runs/wait` and no context, `{}`, and `{"model": "m2", "bogus": 1}`:
- dataclass and pydantic schemas: an instance with the defaults (and `m2`), `bogus` dropped;
- a TypedDict schema: `None`, then `{"model": "m2"}`;
- no schema: `None`, then every key as sent;
- a pydantic schema with a required field and no value: the run fails with ValidationError.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypedDict

import pytest
from langgraph.graph import StateGraph
from langgraph.pregel import Pregel
from langgraph.runtime import Runtime
from pydantic import BaseModel, ValidationError

from runyard.graphs.streaming import stream_graph


@dataclass
class DataclassContext:
    model: str = "default-model"
    user_id: str = "default-user"


class PydanticContext(BaseModel):
    model: str = "pyd-default"
    n: int = 3


class TypedDictContext(TypedDict, total=False):
    model: str


class RequiredContext(BaseModel):
    needed: str


class State(TypedDict, total=False):
    seen: Any


async def look(state: State, runtime: Runtime[Any]) -> State:
    return {"seen": runtime.context}


def graph_with(schema: type | None) -> Pregel:
    builder = StateGraph(State, context_schema=schema)  # type: ignore[arg-type]
    return builder.add_node("look", look).add_edge("__start__", "look").compile()


async def seen(schema: type | None, context: dict[str, Any] | None) -> Any:
    """What the graph's node saw as `runtime.context` for a run with these values."""
    values: Any = None
    async for name, data in stream_graph(
        graph_with(schema), {}, {}, ["values"], subgraphs=False, context=context
    ):
        if name == "values":
            values = data
    return values.get("seen")


@pytest.mark.parametrize("context", [None, {}], ids=["none", "empty"])
async def test_no_context_gives_a_dataclass_its_defaults(context: dict[str, Any] | None) -> None:
    assert await seen(DataclassContext, context) == {
        "model": "default-model",
        "user_id": "default-user",
    }


@pytest.mark.parametrize("context", [None, {}], ids=["none", "empty"])
async def test_no_context_gives_a_pydantic_model_its_defaults(
    context: dict[str, Any] | None,
) -> None:
    assert await seen(PydanticContext, context) == {"model": "pyd-default", "n": 3}


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        (DataclassContext, {"model": "m2", "user_id": "default-user"}),
        (PydanticContext, {"model": "m2", "n": 3}),
        (TypedDictContext, {"model": "m2"}),
        (None, {"model": "m2", "bogus": 1}),
    ],
    ids=["dataclass", "pydantic", "typeddict", "no-schema"],
)
async def test_given_values_win_and_undeclared_keys_are_dropped(
    schema: type | None, expected: dict[str, Any]
) -> None:
    assert await seen(schema, {"model": "m2", "bogus": 1}) == expected


@pytest.mark.parametrize("schema", [TypedDictContext, None], ids=["typeddict", "no-schema"])
async def test_no_defaults_to_give_means_no_context(schema: type | None) -> None:
    assert await seen(schema, {}) is None
    assert await seen(schema, None) is None


async def test_a_required_field_without_a_value_fails_the_run() -> None:
    with pytest.raises(ValidationError):
        await seen(RequiredContext, None)
