"""Table definitions shared by PostgreSQL (production) and SQLite (dev mode)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    Boolean,
    Column,
    DateTime,
    Dialect,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    TypeDecorator,
    func,
)
from sqlalchemy.dialects.postgresql import JSONB

from runyard.domain.status import RunStatus, ThreadStatus
from runyard.domain.tool_calls import ToolCallStatus

metadata = MetaData()

JSONType = JSON().with_variant(JSONB(), "postgresql")


class UTCDateTime(TypeDecorator[datetime]):
    """A timezone-aware UTC timestamp on every backend (SQLite drops the zone otherwise)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if isinstance(value, str):
            value = datetime.fromisoformat(value)
        if value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        return value.astimezone(UTC)


def _now() -> Any:
    return func.now()


# A GIN index of a JSONB column's key/value paths: it answers containment (`@>`) alone, and
# is a third the size of the default operator class's.
_JSONB_CONTAINMENT: dict[str, Any] = {
    "postgresql_using": "gin",
    "postgresql_ops": {"metadata": "jsonb_path_ops"},
}


def postgres_only(index: Index) -> Index:
    """An index only PostgreSQL builds: SQLite could not use it (it compares JSON fields
    with json_extract, one key at a time) and would only pay for it on every write."""
    return index.ddl_if(dialect="postgresql")


assistants = Table(
    "assistants",
    metadata,
    Column("assistant_id", String(64), primary_key=True),
    Column("graph_id", String(255), nullable=False),
    Column("name", String(255), nullable=False),
    Column("description", Text, nullable=True),
    Column("config", JSONType, nullable=False),
    Column("context", JSONType, nullable=False),
    Column("metadata", JSONType, nullable=False),
    Column("version", Integer, nullable=False, default=1),
    Column("created_at", UTCDateTime, nullable=False, server_default=_now()),
    Column("updated_at", UTCDateTime, nullable=False, server_default=_now()),
    Index("ix_assistants_graph_id", "graph_id"),
    postgres_only(Index("ix_assistants_metadata", "metadata", **_JSONB_CONTAINMENT)),
)

assistant_versions = Table(
    "assistant_versions",
    metadata,
    Column(
        "assistant_id",
        String(64),
        ForeignKey("assistants.assistant_id", ondelete="CASCADE"),
        primary_key=True,
    ),
    Column("version", Integer, primary_key=True),
    Column("graph_id", String(255), nullable=False),
    Column("name", String(255), nullable=False),
    Column("description", Text, nullable=True),
    Column("config", JSONType, nullable=False),
    Column("context", JSONType, nullable=False),
    Column("metadata", JSONType, nullable=False),
    Column("created_at", UTCDateTime, nullable=False, server_default=_now()),
)

threads = Table(
    "threads",
    metadata,
    Column("thread_id", String(64), primary_key=True),
    Column("metadata", JSONType, nullable=False),
    Column("config", JSONType, nullable=False),
    Column("status", String(16), nullable=False, default=ThreadStatus.IDLE.value),
    Column("values", JSONType, nullable=True),
    Column("interrupts", JSONType, nullable=False),
    Column("error", JSONType, nullable=True),
    # The context of the thread's latest run (assistant context merged with the run's).
    Column("context", JSONType, nullable=True),
    Column("created_at", UTCDateTime, nullable=False, server_default=_now()),
    Column("updated_at", UTCDateTime, nullable=False, server_default=_now()),
    # Moves only when the state changes (a run ends, a state update), not on metadata edits.
    Column("state_updated_at", UTCDateTime, nullable=True),
    # Retention: what happens when the thread expires, after how many minutes, and when.
    Column("ttl_strategy", String(16), nullable=True),
    Column("ttl_minutes", Float, nullable=True),
    Column("expires_at", UTCDateTime, nullable=True),
    # Priority settings (`@priority.assign`), set at the thread's first run; null until then.
    Column("priority", Integer, nullable=True),
    Column("fairness_group", String(256), nullable=True),
    Index("ix_threads_status", "status"),
    Index("ix_threads_created_at", "created_at"),
    Index("ix_threads_expires_at", "expires_at"),
    # Every documented metadata filter (a search's `metadata`, the owner an auth handler
    # stamps) is a containment (`@>`), which this answers without reading the table.
    postgres_only(Index("ix_threads_metadata", "metadata", **_JSONB_CONTAINMENT)),
    # In the order of a search sorted by updated_at (the id breaks ties).
    Index("ix_threads_updated_at", "updated_at", "thread_id"),
)

runs = Table(
    "runs",
    metadata,
    Column("run_id", String(64), primary_key=True),
    Column(
        "thread_id",
        String(64),
        ForeignKey("threads.thread_id", ondelete="CASCADE"),
        nullable=False,
    ),
    Column("assistant_id", String(64), nullable=False),
    Column("status", String(16), nullable=False, default=RunStatus.PENDING.value),
    Column("metadata", JSONType, nullable=False),
    # Everything a worker needs to execute the run: input, command, config, stream modes...
    Column("kwargs", JSONType, nullable=False),
    Column("multitask_strategy", String(16), nullable=False, default="reject"),
    Column("created_at", UTCDateTime, nullable=False, server_default=_now()),
    Column("updated_at", UTCDateTime, nullable=False, server_default=_now()),
    Column("scheduled_at", UTCDateTime, nullable=True),
    Column("started_at", UTCDateTime, nullable=True),
    Column("ended_at", UTCDateTime, nullable=True),
    # Ownership and fencing: who holds the run, until when, and under which attempt.
    Column("owner", String(128), nullable=True),
    Column("lease_expires_at", UTCDateTime, nullable=True),
    Column("attempt", Integer, nullable=False, default=0),
    # Attempts handed back on purpose (graceful shutdown): `attempt - handovers` were lost.
    Column("handovers", Integer, nullable=False, server_default="0"),
    Column("cancel_action", String(16), nullable=True),
    Column("output", JSONType, nullable=True),
    Column("error", JSONType, nullable=True),
    Column("idempotency_key", String(255), nullable=True, unique=True),
    Column("request_hash", String(64), nullable=True),
    Column("webhook", Text, nullable=True),
    # Stateless runs live on a temporary thread removed after completion when asked.
    Column("on_completion", String(16), nullable=True),
    Column("temporary", Boolean, nullable=False, default=False),
    # The LangSmith project the run was traced to (None: LangSmith tracing was off).
    Column("langsmith_session_name", String(255), nullable=True),
    # The thread's priority settings when the run was created: what it is dispatched by.
    Column("priority", Integer, nullable=False, server_default="0"),
    Column("fairness_group", String(256), nullable=False, server_default="default"),
    # Why a pending run was not claimed (its group at a cap); cleared when it is claimed.
    Column("held_back", Text, nullable=True),
    # The instance that last claimed the run, kept after it ends (the console's charts).
    Column("last_owner", String(128), nullable=True),
    Index("ix_runs_thread_status_created", "thread_id", "status", "created_at"),
    Index("ix_runs_status_lease", "status", "lease_expires_at"),
    Index("ix_runs_group_status", "fairness_group", "status"),
    Index("ix_runs_group_started", "fairness_group", "started_at"),
    Index("ix_runs_ended_at", "ended_at"),
)

crons = Table(
    "crons",
    metadata,
    Column("cron_id", String(64), primary_key=True),
    Column(
        "assistant_id",
        String(64),
        ForeignKey("assistants.assistant_id", ondelete="CASCADE"),
        nullable=False,
    ),
    # Null for a stateless cron: each of its runs gets a new thread.
    Column(
        "thread_id",
        String(64),
        ForeignKey("threads.thread_id", ondelete="CASCADE"),
        nullable=True,
    ),
    Column("user_id", String(255), nullable=True),
    Column("schedule", String(255), nullable=False),
    Column("timezone", String(64), nullable=True),
    # The body of every run the cron creates (assistant_id, input, config, stream modes...).
    Column("payload", JSONType, nullable=False),
    Column("metadata", JSONType, nullable=False),
    Column("on_run_completed", String(16), nullable=True),
    Column("enabled", Boolean, nullable=False, default=True),
    Column("end_time", UTCDateTime, nullable=True),
    # The next occurrence to fire; null once the schedule has passed its end time.
    Column("next_run_date", UTCDateTime, nullable=True),
    Column("created_at", UTCDateTime, nullable=False, server_default=_now()),
    Column("updated_at", UTCDateTime, nullable=False, server_default=_now()),
    Index("ix_crons_enabled_next_run_date", "enabled", "next_run_date"),
    Index("ix_crons_assistant_id", "assistant_id"),
    Index("ix_crons_thread_id", "thread_id"),
    postgres_only(Index("ix_crons_metadata", "metadata", **_JSONB_CONTAINMENT)),
)

# One row per occurrence of a cron that an instance claimed: the primary key is the
# idempotency key, so of several instances due to fire the same occurrence one inserts.
cron_firings = Table(
    "cron_firings",
    metadata,
    Column(
        "cron_id",
        String(64),
        ForeignKey("crons.cron_id", ondelete="CASCADE"),
        primary_key=True,
    ),
    Column("scheduled_for", UTCDateTime, primary_key=True),
    Column("claimed_by", String(128), nullable=False),
    Column("claimed_at", UTCDateTime, nullable=False, server_default=_now()),
    # Set once the run exists; a claim left without either is retried (same idempotency key).
    Column("run_id", String(64), nullable=True),
    # Why no run was created (the thread was busy and the strategy is reject, ...).
    Column("error", Text, nullable=True),
    Index("ix_cron_firings_claimed_at", "claimed_at"),
)

# Webhook deliveries owed for finished runs (an outbox): written when the run ends, claimed
# with a lease by any instance, so a delivery outlives the instance that owed it.
webhook_deliveries = Table(
    "webhook_deliveries",
    metadata,
    # `webhook-id` of the delivery, the same on every attempt.
    Column("delivery_id", String(128), primary_key=True),
    # No foreign key: a stateless run's thread, and the run with it, is deleted meanwhile.
    Column("run_id", String(64), nullable=False),
    Column("url", Text, nullable=False),
    Column("payload", JSONType, nullable=False),
    Column("status", String(16), nullable=False),
    # Attempts claimed so far (the fencing token of the attempt in flight).
    Column("attempts", Integer, nullable=False),
    Column("owner", String(128), nullable=True),
    # While pending: the lease of the attempt in flight, or when the next one is due.
    Column("lease_expires_at", UTCDateTime, nullable=True),
    Column("last_error", Text, nullable=True),
    Column("created_at", UTCDateTime, nullable=False, server_default=_now()),
    Column("updated_at", UTCDateTime, nullable=False, server_default=_now()),
    Index("ix_webhook_deliveries_due", "status", "lease_expires_at"),
)

# Which code serves on the schema (runyard/db/schema.py): one row per migration applied from
# 0009 on, naming the oldest code revision that still serves on the schema it leaves, so that
# an instance finding a revision it does not know learns from the database whether it may.
schema_compatibility = Table(
    "schema_compatibility",
    metadata,
    Column("revision", String(32), primary_key=True),
    Column("serves_code_from", String(32), nullable=False),
    Column("recorded_at", UTCDateTime, nullable=False, server_default=_now()),
)

# At-most-once tool calls (runyard/tools/): a decorated call's intent, then its outcome, each
# written only while the attempt that writes it holds its run. A call is keyed within its
# thread (`call_key`: the step's namespace and the model's tool call id), and goes with it.
tool_calls = Table(
    "tool_calls",
    metadata,
    Column(
        "thread_id",
        String(64),
        ForeignKey("threads.thread_id", ondelete="CASCADE"),
        primary_key=True,
    ),
    Column("call_key", String(36), primary_key=True),
    Column("checkpoint_ns", Text, nullable=False),
    Column("tool_call_id", Text, nullable=False),
    Column("tool", Text, nullable=False),
    # The attempt that made the call (or, for an outcome a person answered, recorded it).
    Column("run_id", String(64), nullable=False),
    Column("attempt", Integer, nullable=False),
    Column("status", String(16), nullable=False, default=ToolCallStatus.INTENT.value),
    # The result as the checkpointer serializes (and encrypts) a value: its type and bytes.
    # Null with `result_bytes` set: it was larger than RUNYARD_MAX_TOOL_RESULT_BYTES.
    Column("result_type", String(64), nullable=True),
    Column("result", LargeBinary, nullable=True),
    Column("result_bytes", Integer, nullable=True),
    Column("created_at", UTCDateTime, nullable=False, server_default=_now()),
    Column("updated_at", UTCDateTime, nullable=False, server_default=_now()),
)

# Each instance's own record (runyard/background/instance_record.py), written every heartbeat
# and removed when it stops: what the console shows of the fleet. A drain an operator asks of
# an instance is recorded here (`drain_requested_by`) and carried out at its next heartbeat.
instances = Table(
    "instances",
    metadata,
    Column("instance_id", String(128), primary_key=True),
    Column("host", String(255), nullable=False),
    Column("version", String(64), nullable=False),
    Column("started_at", UTCDateTime, nullable=False),
    Column("heartbeat_at", UTCDateTime, nullable=False),
    Column("slots", Integer, nullable=False),
    Column("slots_used", Integer, nullable=False),
    Column("draining", Boolean, nullable=False),
    Column("drain_requested_by", String(255), nullable=True),
)
