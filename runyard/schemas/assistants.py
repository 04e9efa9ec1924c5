"""Wire models of the Agent Protocol's assistants resource."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from runyard.domain.assistant import AssistantRecord, AssistantVersionRecord
from runyard.schemas.common import (
    IsoDatetime,
    JsonInt,
    Limit,
    Metadata,
    MetadataIn,
    NotBool,
    Offset,
    SortOrder,
)

AssistantSortBy = Literal["assistant_id", "graph_id", "name", "created_at", "updated_at"]
AssistantField = Literal[
    "assistant_id",
    "graph_id",
    "name",
    "description",
    "config",
    "context",
    "created_at",
    "updated_at",
    "metadata",
    "version",
]


class AssistantConfig(BaseModel):
    """A RunnableConfig as an assistant stores it; unknown keys are kept as given."""

    model_config = ConfigDict(extra="allow")

    tags: list[str] | None = None
    recursion_limit: Annotated[int, Field(ge=1), NotBool] | None = None
    configurable: dict[str, Any] | None = None


class AssistantCreate(BaseModel):
    """Body of POST /assistants."""

    graph_id: str = Field(min_length=1, description="A graph id from langgraph.json.")
    assistant_id: str | None = Field(default=None, description="A UUID; random when absent.")
    config: AssistantConfig | None = None
    context: dict[str, Any] | None = None
    metadata: MetadataIn | None = None
    if_exists: Literal["raise", "do_nothing"] = "raise"
    name: str | None = None
    description: str | None = None


class AssistantPatch(BaseModel):
    """Body of PATCH /assistants/{assistant_id}: every field given makes the new version."""

    graph_id: Annotated[str, Field(min_length=1)] | None = None
    config: AssistantConfig | None = None
    context: dict[str, Any] | None = None
    metadata: MetadataIn | None = Field(default=None, description="Merged into the current one.")
    name: str | None = None
    description: str | None = None


class AssistantFilter(BaseModel):
    """Body of POST /assistants/count (and the filters of search)."""

    metadata: MetadataIn | None = Field(default=None, description="Containment match.")
    graph_id: str | None = None
    name: str | None = Field(default=None, description="Case-insensitive substring match.")


class AssistantSearch(AssistantFilter):
    """Body of POST /assistants/search."""

    limit: Limit = 10
    offset: Offset = 0
    sort_by: AssistantSortBy | None = None
    sort_order: SortOrder | None = None
    select: list[AssistantField] | None = None


class AssistantVersionsSearch(BaseModel):
    """Body of POST /assistants/{assistant_id}/versions."""

    metadata: MetadataIn | None = None
    limit: Limit = 10
    offset: Offset = 0


class AssistantVersionChange(BaseModel):
    """Body of POST /assistants/{assistant_id}/latest."""

    version: Annotated[int, Field(ge=1), NotBool]


class AssistantVersion(BaseModel):
    """One stored version of an assistant."""

    assistant_id: str
    version: JsonInt
    graph_id: str
    config: dict[str, Any]
    context: dict[str, Any]
    metadata: Metadata
    created_at: IsoDatetime
    name: str
    description: str | None = None


class Assistant(BaseModel):
    """An assistant: a graph with its configuration, at its current version."""

    assistant_id: str
    graph_id: str
    config: dict[str, Any]
    context: dict[str, Any]
    metadata: Metadata
    name: str
    created_at: IsoDatetime
    updated_at: IsoDatetime
    version: JsonInt
    description: str | None = None


def to_wire(assistant: AssistantRecord) -> dict[str, Any]:
    """The Agent Protocol view of an assistant (its JSON as given: opened first)."""
    return {
        "assistant_id": assistant.assistant_id,
        "graph_id": assistant.graph_id,
        "name": assistant.name,
        "description": assistant.description,
        "config": assistant.config,
        "context": assistant.context,
        "metadata": assistant.metadata,
        "version": assistant.version,
        "created_at": assistant.created_at.isoformat(),
        "updated_at": assistant.updated_at.isoformat(),
    }


def version_to_wire(version: AssistantVersionRecord) -> dict[str, Any]:
    """The Agent Protocol view of one version of an assistant."""
    return {
        "assistant_id": version.assistant_id,
        "version": version.version,
        "graph_id": version.graph_id,
        "name": version.name,
        "description": version.description,
        "config": version.config,
        "context": version.context,
        "metadata": version.metadata,
        "created_at": version.created_at.isoformat(),
    }


def columns_to_wire(columns: dict[str, Any]) -> dict[str, Any]:
    """Some columns of an assistant (a search's `select`) as JSON values, timestamps in
    ISO 8601 as `to_wire` writes them."""
    return {k: v.isoformat() if isinstance(v, datetime) else v for k, v in columns.items()}


class GraphSchemas(BaseModel):
    """The JSON schemas of a graph; a schema that cannot be derived is null."""

    input_schema: dict[str, Any] | None = None
    output_schema: dict[str, Any] | None = None
    state_schema: dict[str, Any] | None = None
    config_schema: dict[str, Any] | None = None
    context_schema: dict[str, Any] | None = None


class AssistantSchemas(BaseModel):
    """Answer of GET /assistants/{assistant_id}/schemas."""

    graph_id: str
    input_schema: dict[str, Any] | None = None
    output_schema: dict[str, Any] | None = None
    state_schema: dict[str, Any] | None = None
    config_schema: dict[str, Any] | None = None
    context_schema: dict[str, Any] | None = None


class DrawableGraph(BaseModel):
    """Nodes and edges of a graph, as `Graph.to_json()` gives them."""

    model_config = ConfigDict(extra="allow")

    nodes: list[dict[str, Any]]
    edges: list[dict[str, Any]]
