"""Wire models of the Agent Protocol's threads resource and thread state."""

from __future__ import annotations

import uuid
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator

from runyard.schemas.common import (
    IsoDatetime,
    JsonBool,
    Limit,
    Metadata,
    MetadataIn,
    NotBool,
    Offset,
    SortOrder,
)

ThreadStatusName = Literal["idle", "busy", "interrupted", "error"]
ThreadSortBy = Literal["thread_id", "status", "created_at", "updated_at", "state_updated_at"]
ThreadField = Literal[
    "thread_id",
    "created_at",
    "updated_at",
    "state_updated_at",
    "metadata",
    "config",
    "context",
    "status",
    "values",
    "interrupts",
    "error",
]
StateValues = dict[str, Any] | list[Any] | None
STATE_SELECT = "Fields of each state to return; `values.<key>` returns one key of the values."
StateField = Annotated[
    str,
    StringConstraints(
        pattern=r"^(values|next|tasks|checkpoint|metadata|created_at|parent_checkpoint"
        r"|interrupts|values\..+)$"
    ),
]
# A century: a longer TTL is a mistake, and its expiry would not fit a timestamp.
MAX_TTL_MINUTES = 100 * 365 * 24 * 60
HistoryLimit = Annotated[
    int, Field(ge=1, le=1000, description="Number of states, 1 to 1000."), NotBool
]


class CheckpointConfig(BaseModel):
    """Which checkpoint of a thread: its id, and the namespace of a subgraph (empty for root)."""

    model_config = ConfigDict(extra="ignore")

    thread_id: str | None = None
    checkpoint_ns: str | None = None
    checkpoint_id: str | None = None
    checkpoint_map: dict[str, Any] | None = None

    @model_validator(mode="before")
    @classmethod
    def unwrap_configurable(cls, data: Any) -> Any:
        """Take a RunnableConfig too (`{"configurable": {...}}`), as the SDK sends `before`."""
        if isinstance(data, dict) and isinstance(data.get("configurable"), dict):
            flat = {k: v for k, v in data.items() if k != "configurable"}
            return {**data["configurable"], **flat}
        return data


class ThreadTTL(BaseModel):
    """A thread's time-to-live: minutes from now, and what its expiry does."""

    model_config = ConfigDict(extra="forbid")

    strategy: Literal["delete", "keep_latest"] = "delete"
    ttl: float = Field(
        strict=True,
        gt=0,
        le=MAX_TTL_MINUTES,
        description="Minutes from now until the thread is swept.",
    )


# Strict: a boolean is no number of minutes (and the schema keeps its bounds).
TTLMinutes = Annotated[float, Field(strict=True, gt=0, le=MAX_TTL_MINUTES)]


class ThreadPrune(BaseModel):
    """Body of POST /threads/prune."""

    model_config = ConfigDict(extra="forbid")

    thread_ids: list[uuid.UUID] = Field(max_length=1000)
    strategy: Literal["delete", "keep_latest"] = "delete"


class StateCommand(BaseModel):
    """A LangGraph Command applied as a state update: resume, update, goto."""

    model_config = ConfigDict(extra="forbid")

    update: Any = None
    resume: Any = None
    goto: Any = None


class SuperstepUpdate(BaseModel):
    """One update of a superstep, applied as if `as_node` had just run."""

    values: StateValues = None
    command: StateCommand | None = None
    as_node: str = Field(min_length=1)


class Superstep(BaseModel):
    """Updates applied together, as one step of the graph."""

    updates: list[SuperstepUpdate]


class ThreadCreate(BaseModel):
    """Body of POST /threads."""

    thread_id: uuid.UUID | None = Field(default=None, description="A UUID; random when absent.")
    metadata: MetadataIn | None = None
    if_exists: Literal["raise", "do_nothing"] = "raise"
    graph_id: str | None = Field(
        default=None, description="The thread's graph, stored as metadata.graph_id."
    )
    supersteps: list[Superstep] | None = Field(
        default=None, description="State updates to apply at creation (needs a graph_id)."
    )
    ttl: ThreadTTL | TTLMinutes | None = None


class ThreadPatch(BaseModel):
    """Body of PATCH /threads/{thread_id}."""

    metadata: MetadataIn = Field(default_factory=dict, description="Merged into the current one.")
    ttl: ThreadTTL | TTLMinutes | None = None


class ThreadFilter(BaseModel):
    """Body of POST /threads/count (and the filters of search)."""

    metadata: MetadataIn | None = Field(default=None, description="Containment match.")
    values: dict[str, Any] | None = Field(default=None, description="Containment match.")
    status: ThreadStatusName | None = None


class ThreadSearch(ThreadFilter):
    """Body of POST /threads/search."""

    ids: list[uuid.UUID] | None = None
    limit: Limit = 10
    offset: Offset = 0
    sort_by: ThreadSortBy | None = None
    sort_order: SortOrder | None = None
    select: list[ThreadField] | None = None
    extract: dict[str, str] | None = Field(
        default=None,
        max_length=10,
        description="Alias → path such as `values.messages[-1].content`.",
    )


class ThreadStateUpdate(BaseModel):
    """Body of POST /threads/{thread_id}/state."""

    values: StateValues = None
    as_node: str | None = None
    checkpoint: CheckpointConfig | None = None
    checkpoint_id: str | None = None


class ThreadStateAtCheckpoint(BaseModel):
    """Body of POST /threads/{thread_id}/state/checkpoint."""

    checkpoint: CheckpointConfig
    subgraphs: JsonBool = False
    select: list[StateField] | None = Field(default=None, description=STATE_SELECT)


class ThreadHistorySearch(BaseModel):
    """Body of POST /threads/{thread_id}/history."""

    limit: HistoryLimit = 10
    before: str | CheckpointConfig | None = None
    metadata: MetadataIn | None = None
    checkpoint: CheckpointConfig | None = None
    select: list[StateField] | None = Field(default=None, description=STATE_SELECT)


class Thread(BaseModel):
    """A thread: its metadata, status and latest state values."""

    thread_id: str
    created_at: IsoDatetime
    updated_at: IsoDatetime
    state_updated_at: IsoDatetime
    metadata: Metadata
    status: ThreadStatusName
    config: dict[str, Any]
    values: Any = None
    interrupts: dict[str, list[dict[str, Any]]]
    error: Any = None


class CheckpointRef(BaseModel):
    """A checkpoint as the state endpoints return it."""

    model_config = ConfigDict(extra="allow")

    thread_id: str | None = None
    checkpoint_ns: str = ""
    checkpoint_id: str | None = None


class ThreadUpdateStateResponse(BaseModel):
    """Answer of POST /threads/{thread_id}/state: the checkpoint the update wrote."""

    checkpoint: CheckpointRef
