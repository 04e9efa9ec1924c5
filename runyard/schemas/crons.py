"""Wire models of crons, as langgraph-sdk's `client.crons` sends and expects them."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from runyard.domain.status import MultitaskStrategy
from runyard.schemas.common import (
    DurabilityFields,
    IsoDatetime,
    JsonBool,
    Limit,
    Metadata,
    Offset,
    SortOrder,
    StrategyName,
    WebhookUrl,
)
from runyard.schemas.runs import StreamModeName

CronSortBy = Literal[
    "cron_id", "assistant_id", "thread_id", "next_run_date", "end_time", "created_at", "updated_at"
]
CronField = Literal[
    "cron_id",
    "assistant_id",
    "thread_id",
    "on_run_completed",
    "end_time",
    "schedule",
    "timezone",
    "created_at",
    "updated_at",
    "user_id",
    "payload",
    "next_run_date",
    "metadata",
    "enabled",
    # langgraph-sdk lists it among the selectable fields; it is the server's clock.
    "now",
]
Interrupts = Literal["*"] | list[str] | None

# Fields of a cron body that become the body of each run it creates.
RUN_FIELDS = (
    "assistant_id",
    "input",
    "config",
    "context",
    "interrupt_before",
    "interrupt_after",
    "webhook",
    "multitask_strategy",
    "stream_mode",
    "stream_subgraphs",
    "stream_resumable",
    "durability",
)


class CronRunFields(DurabilityFields):
    """What every run of the cron is created with."""

    model_config = ConfigDict(extra="ignore")

    input: Any = None
    config: dict[str, Any] | None = None
    context: dict[str, Any] | None = None
    interrupt_before: Interrupts = None
    interrupt_after: Interrupts = None
    # The URL policy (webhooks.url in langgraph.json) checks the rest, max_url_length included.
    webhook: WebhookUrl | None = Field(
        default=None, max_length=65536, json_schema_extra={"pattern": "^https?://"}
    )
    stream_mode: StreamModeName | list[StreamModeName] | None = None
    stream_subgraphs: JsonBool | None = None
    stream_resumable: JsonBool | None = None


class ThreadCronCreate(CronRunFields):
    """Body of POST /threads/{thread_id}/runs/crons."""

    assistant_id: str = Field(min_length=1, max_length=255)
    schedule: str = Field(min_length=1, max_length=255)
    timezone: str | None = Field(default=None, max_length=64)
    end_time: datetime | None = None
    metadata: Metadata | None = None
    enabled: JsonBool = True
    multitask_strategy: StrategyName = MultitaskStrategy.ENQUEUE


class CronCreate(ThreadCronCreate):
    """Body of POST /runs/crons (stateless: each run gets a new thread)."""

    on_run_completed: Literal["delete", "keep"] = "delete"


class CronPatch(CronRunFields):
    """Body of PATCH /runs/crons/{cron_id}: only the fields sent change."""

    schedule: str | None = Field(default=None, min_length=1, max_length=255)
    timezone: str | None = Field(default=None, max_length=64)
    end_time: datetime | None = None
    metadata: Metadata | None = None
    enabled: JsonBool | None = None
    on_run_completed: Literal["delete", "keep"] | None = None


class CronSearch(BaseModel):
    """Body of POST /runs/crons/search."""

    model_config = ConfigDict(extra="forbid")

    assistant_id: str | None = None
    thread_id: str | None = None
    enabled: JsonBool | None = None
    metadata: Metadata | None = None
    limit: Limit = 10
    offset: Offset = 0
    sort_by: CronSortBy = "created_at"
    sort_order: SortOrder = "desc"
    select: list[CronField] | None = None


class CronCount(BaseModel):
    """Body of POST /runs/crons/count."""

    model_config = ConfigDict(extra="forbid")

    assistant_id: str | None = None
    thread_id: str | None = None
    metadata: Metadata | None = None


class Cron(BaseModel):
    """A cron as the Agent Protocol returns it."""

    cron_id: str
    assistant_id: str
    thread_id: str | None
    on_run_completed: Literal["delete", "keep"] | None
    end_time: IsoDatetime | None
    schedule: str
    timezone: str | None
    created_at: IsoDatetime
    updated_at: IsoDatetime
    payload: dict[str, Any]
    user_id: str | None
    next_run_date: IsoDatetime | None
    metadata: Metadata
    enabled: bool
