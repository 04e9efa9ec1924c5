"""Describes a compiled graph: JSON schemas of its input, output, state, config and context,
its drawable structure, and its subgraphs."""

from __future__ import annotations

import logging
import re
import warnings
from collections.abc import Sequence
from typing import Any, get_type_hints

from langgraph.pregel import Pregel
from pydantic import TypeAdapter, create_model

from runyard.domain.errors import InvalidInputError
from runyard.graphs.serialize import to_jsonable

log = logging.getLogger("runyard.graphs")

# Keys the server fills in itself: a client never sets them through `configurable`.
RESERVED_CONFIGURABLE_KEYS = (
    "__pregel_checkpointer",
    "__pregel_store",
    "checkpoint_id",
    "checkpoint_ns",
    "thread_id",
)


def graph_schemas(graph: Any) -> dict[str, dict[str, Any] | None]:
    """The five JSON schemas of a graph; one that cannot be derived is None."""
    return {
        "input_schema": _safely(graph, "input", lambda: input_jsonschema(graph)),
        "output_schema": _safely(graph, "output", lambda: output_jsonschema(graph)),
        "state_schema": _safely(graph, "state", lambda: state_jsonschema(graph)),
        "config_schema": _safely(graph, "config", lambda: configurable_jsonschema(graph)),
        "context_schema": _safely(graph, "context", lambda: graph.get_context_jsonschema()),
    }


def input_jsonschema(graph: Pregel) -> dict[str, Any]:
    """The schema of the graph's input, rebuilt from its channels when pydantic refuses it."""
    try:
        return graph.get_input_jsonschema()
    except Exception:
        # Pydantic rejects typing.TypedDict states on Python < 3.12; the channels still
        # say which keys the graph takes and of which types.
        return channels_jsonschema(graph, graph.input_channels, "Input")


def output_jsonschema(graph: Pregel) -> dict[str, Any]:
    """The schema of the graph's output, rebuilt from its channels when pydantic refuses it."""
    try:
        return graph.get_output_jsonschema()
    except Exception:
        return channels_jsonschema(graph, graph.output_channels, "Output")


def state_jsonschema(graph: Pregel) -> dict[str, Any]:
    """An object schema with one optional property per state channel the graph streams."""
    return channels_jsonschema(graph, graph.stream_channels_list, "State")


def channels_jsonschema(
    graph: Pregel, channels: str | Sequence[str], suffix: str
) -> dict[str, Any]:
    """The schema of one channel's values, or of an object with one property per channel."""
    title = graph.get_name(suffix)
    if isinstance(channels, str):
        # StateGraph feeds its whole input through one channel typed with the input schema.
        declared: Any = getattr(graph.channels[channels], "UpdateType", Any)
        if _update_type(graph, channels) is not Any or not isinstance(declared, type):
            return TypeAdapter(_update_type(graph, channels)).json_schema()
        channels = list(get_type_hints(declared))
        title = declared.__name__
    fields = {
        key: (_update_type(graph, key) if key in graph.channels else Any, None) for key in channels
    }
    model = create_model(title, **fields)  # type: ignore[call-overload]
    return model.model_json_schema()


def configurable_jsonschema(graph: Pregel) -> dict[str, Any]:
    """The schema of `config.configurable` only (not recursion_limit, tags...), or {}."""
    with warnings.catch_warnings():
        # config_schema() is deprecated in LangGraph 1.x in favour of context schemas, but it
        # is still the one way to learn what `configurable` accepts on older graphs.
        warnings.simplefilter("ignore")
        config_model = graph.config_schema()
    fields = getattr(config_model, "model_fields", None) or {}
    if "configurable" not in fields:
        return {}
    annotation: Any = fields["configurable"].annotation
    schema: dict[str, Any] = TypeAdapter(annotation).json_schema()
    for key in RESERVED_CONFIGURABLE_KEYS:
        schema.get("properties", {}).pop(key, None)
    config_type = getattr(graph, "config_type", None) or getattr(graph, "context_schema", None)
    if config_type is not None and hasattr(config_type, "__name__"):
        schema["title"] = config_type.__name__
    return schema


XRAY_DEPTH = "[1-9][0-9]{0,8}"
# What `parse_xray` accepts, as the OpenAPI document declares it.
XRAY_PATTERN = f"^(|true|True|false|False|0|{XRAY_DEPTH})$"


def parse_xray(value: str | None) -> bool | int:
    """The `xray` query value as LangGraph reads it: true/false or a depth of at least 1."""
    if value is None or value in ("", "false", "False", "0"):
        return False
    if value in ("true", "True"):
        return True
    if not re.fullmatch(XRAY_DEPTH, value):
        raise InvalidInputError(
            f"invalid xray value {value!r}: use true, false or a positive depth such as 1"
        )
    return int(value)


async def drawable_graph(graph: Pregel, xray: bool | int) -> dict[str, Any]:
    """The graph's nodes and edges as LangGraph Platform returns them (`to_json()`)."""
    try:
        drawable = await graph.aget_graph(xray=xray)
    except NotImplementedError:
        raise InvalidInputError("this graph does not support visualization") from None
    data: dict[str, Any] = to_jsonable(drawable.to_json())
    for node in data.get("nodes", []):
        # The Python class path of each node is an implementation detail; Platform drops it.
        if isinstance(node.get("data"), dict):
            node["data"].pop("id", None)
    return data


async def subgraph_schemas(
    graph: Pregel, namespace: str | None, recurse: bool
) -> dict[str, dict[str, Any]]:
    """The schemas of each subgraph, keyed by namespace (`parent|child` when nested)."""
    try:
        return {
            ns: graph_schemas(subgraph)
            async for ns, subgraph in graph.aget_subgraphs(namespace=namespace, recurse=recurse)
        }
    except NotImplementedError:
        raise InvalidInputError("this graph does not expose its subgraphs") from None


def _update_type(graph: Pregel, key: str) -> Any:
    update_type: Any = getattr(graph.channels[key], "UpdateType", Any)
    try:
        TypeAdapter(update_type).json_schema()
    except Exception:
        # Some channel types (typing.TypedDict on Python 3.11, arbitrary classes) have no
        # JSON schema; the property still exists, just without a type.
        return Any
    return update_type


def _safely(graph: Any, what: str, compute: Any) -> dict[str, Any] | None:
    try:
        result = compute()
    except Exception as exc:
        log.warning(
            "graph_schema_failed graph=%s schema=%s error=%s",
            getattr(graph, "name", "?"),
            what,
            f"{type(exc).__name__}: {exc}",
        )
        return None
    return to_jsonable(result) if result is not None else None
