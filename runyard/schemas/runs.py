"""Wire models of runs, as langgraph-sdk sends and expects them."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from runyard.domain.status import MultitaskStrategy
from runyard.domain.stream_modes import StreamModeName
from runyard.schemas.common import (
    DurabilityFields,
    IsoDatetime,
    JsonBool,
    MetadataIn,
    NotBool,
    StrategyName,
    WebhookUrl,
)


class CommandBody(BaseModel):
    """A LangGraph Command: resume an interrupt, update state, or go to nodes."""

    model_config = ConfigDict(extra="forbid")

    resume: Any = None
    update: Any = None
    goto: Any = None


class RunCreate(DurabilityFields):
    """Body of every run-creating call (stateful and stateless)."""

    model_config = ConfigDict(extra="ignore")

    assistant_id: str = Field(min_length=1, max_length=255)
    input: Any = None
    command: CommandBody | None = None
    metadata: MetadataIn | None = None
    config: dict[str, Any] | None = None
    context: dict[str, Any] | None = None
    checkpoint: dict[str, Any] | None = None
    checkpoint_id: str | None = None
    interrupt_before: Literal["*"] | list[str] | None = None
    interrupt_after: Literal["*"] | list[str] | None = None
    stream_mode: StreamModeName | list[StreamModeName] | None = None
    stream_subgraphs: JsonBool = False
    stream_resumable: JsonBool = False
    # The URL policy (webhooks.url in langgraph.json) checks the rest, max_url_length included.
    webhook: WebhookUrl | None = Field(
        default=None, max_length=65536, json_schema_extra={"pattern": "^https?://"}
    )
    multitask_strategy: StrategyName = MultitaskStrategy.ENQUEUE
    if_not_exists: Literal["create", "reject"] = "reject"
    on_disconnect: Literal["cancel", "continue"] = "continue"
    on_completion: Literal["delete", "keep"] | None = None
    after_seconds: Annotated[float, Field(ge=0, le=30 * 24 * 3600), NotBool] | None = None
    feedback_keys: list[str] | None = None

    def stream_modes(self) -> list[str]:
        """The requested stream modes as a list (default: values)."""
        if self.stream_mode is None:
            return ["values"]
        if isinstance(self.stream_mode, str):
            return [self.stream_mode]
        return list(dict.fromkeys(self.stream_mode)) or ["values"]


RunField = Literal[
    "run_id",
    "thread_id",
    "assistant_id",
    "created_at",
    "updated_at",
    "status",
    "metadata",
    "kwargs",
    "multitask_strategy",
    "langsmith_session_name",
    "held_back",
]


class Run(BaseModel):
    """A run as the Agent Protocol returns it."""

    run_id: str
    thread_id: str
    assistant_id: str
    created_at: IsoDatetime
    updated_at: IsoDatetime
    status: str
    metadata: dict[str, Any]
    kwargs: dict[str, Any]
    multitask_strategy: str
    langsmith_session_name: str | None = None
    # Why a pending run was not started yet: its fairness group at a cap (Runyard's own).
    held_back: str | None = None


class CancelMany(BaseModel):
    """Body of POST /runs/cancel."""

    model_config = ConfigDict(extra="forbid")

    thread_id: str | None = None
    run_ids: list[str] | None = None
    status: Literal["pending", "running", "all"] | None = None
