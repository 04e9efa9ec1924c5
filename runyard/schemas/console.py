"""Wire models of the operator console's JSON API (/console/api)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from runyard.schemas.common import IsoDatetime


class FleetInstance(BaseModel):
    """One instance as its own record says, and whether it is alive now."""

    instance_id: str
    host: str
    version: str
    started_at: IsoDatetime
    heartbeat_at: IsoDatetime
    heartbeat_age_seconds: float
    slots: int
    slots_used: int
    slots_free: int
    draining: bool
    drain_requested_by: str | None = None
    alive: bool
    # The instance that answered this request.
    serving: bool


class QueueGroup(BaseModel):
    """Pending runs of one fairness group at one priority."""

    fairness_group: str
    priority: int
    pending: int
    oldest_wait_seconds: float


class HeldBackRun(BaseModel):
    """A pending run a group cap holds back, and why."""

    run_id: str
    thread_id: str | None
    fairness_group: str
    priority: int
    reason: str
    wait_seconds: float


class Queue(BaseModel):
    """What waits: per group and priority (the busiest first), and what is held back."""

    pending: int
    oldest_wait_seconds: float | None
    groups: list[QueueGroup]
    held_back: list[HeldBackRun]


class ConsoleRun(BaseModel):
    """A run as the console lists it."""

    run_id: str
    thread_id: str | None
    assistant_id: str
    status: str
    owner: str | None
    last_owner: str | None
    attempt: int
    lease_expires_at: IsoDatetime | None
    fairness_group: str
    priority: int
    created_at: IsoDatetime
    started_at: IsoDatetime | None
    ended_at: IsoDatetime | None
    error: str | None = None


class NextFiring(BaseModel):
    """An enabled cron and its next firing."""

    cron_id: str
    assistant_id: str | None
    thread_id: str | None
    schedule: str
    timezone: str | None
    next_run_date: IsoDatetime
    end_time: IsoDatetime | None


class Delivery(BaseModel):
    """A webhook delivery pending or failed."""

    delivery_id: str
    run_id: str
    url: str
    status: str
    attempts: int
    last_answer: str | None
    # Pending: when its next attempt is due (or its lease ends); failed: when it failed.
    next_attempt_at: IsoDatetime | None
    updated_at: IsoDatetime


class ChartSeries(BaseModel):
    """Per minute: runs started, finished, and the p50/p95 duration (s) of those finished."""

    key: str
    started: list[int]
    finished: list[int]
    p50: list[float | None]
    p95: list[float | None]


class Charts(BaseModel):
    """The last hour, minute by minute (`minutes`: each minute's start, oldest first)."""

    minutes: list[IsoDatetime]
    total: ChartSeries
    by_instance: list[ChartSeries]
    by_group: list[ChartSeries]


class Snapshot(BaseModel):
    """Everything the console shows, as one instance saw it at `generated_at`."""

    generated_at: IsoDatetime
    serving_instance: str
    fleet: list[FleetInstance]
    queue: Queue
    running: list[ConsoleRun]
    failures: list[ConsoleRun]
    crons: list[NextFiring]
    webhooks: list[Delivery]
    charts: Charts


class RunSearch(BaseModel):
    """Runs whose run, thread or assistant id is the term."""

    term: str
    runs: list[ConsoleRun]


class CancelBody(BaseModel):
    """How to cancel a run from the console."""

    model_config = ConfigDict(extra="forbid")
    action: Literal["interrupt", "rollback"] = Field(
        default="interrupt",
        description="interrupt: stop the run, keep its checkpoints; rollback: stop and delete it",
    )


class ActionResult(BaseModel):
    """What an action did, and who did it (as written in the log)."""

    action: str
    target: str
    by: str
    detail: dict[str, Any] = Field(default_factory=dict)
