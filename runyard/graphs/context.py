"""The `context` a run hands its graph, built from the graph's `context_schema`."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from typing import Any

from langgraph.pregel import Pregel
from pydantic import BaseModel

log = logging.getLogger("runyard.graphs")


def run_context(graph: Pregel, context: Mapping[str, Any] | None) -> Any:
    """The context object for one run of `graph`, from the run's context values.

    As LangGraph's server: keys the schema does not declare are dropped, and a dataclass or
    pydantic schema is built from what remains, so a run with no context (or `{}`) sees the
    schema's defaults instead of `None`. A TypedDict schema, or none, gets the values as a
    dict (`None` when there are none: a TypedDict has no defaults to give).
    """
    values = dict(context or {})
    schema = getattr(graph, "context_schema", None)
    if not isinstance(schema, type):
        return values or None
    names = schema_keys(schema)
    if names:
        dropped = sorted(set(values) - names)
        if dropped:
            log.debug("context_keys_dropped keys=%s schema=%s", dropped, schema.__qualname__)
        values = {key: value for key, value in values.items() if key in names}
    if dataclasses.is_dataclass(schema) or issubclass(schema, BaseModel):
        return schema(**values)
    return values or None


def schema_keys(schema: type) -> set[str]:
    """The keys a context schema declares (its JSON schema's properties); empty if unknown."""
    if dataclasses.is_dataclass(schema):
        return {field.name for field in dataclasses.fields(schema) if field.init}
    if issubclass(schema, BaseModel):
        fields = schema.model_fields.items()
        return {name for name, _ in fields} | {f.alias for _, f in fields if f.alias}
    # A TypedDict's annotations include those of the TypedDicts it extends.
    return set(getattr(schema, "__annotations__", {}))
