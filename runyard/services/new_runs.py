"""Building a new run from a request: the `NewRun` the lifecycle creates
(runyard/lifecycle/machine.py), with the run's row (request, assistant, configuration) and its
thread's JSON sealed."""

from __future__ import annotations

import copy
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from langgraph.checkpoint.base.id import uuid6

from runyard.domain.assistant import AssistantRecord
from runyard.domain.configurable import without_reserved
from runyard.domain.encrypted_fields import RUN_KWARGS_FIELDS
from runyard.domain.encryption_context import CONTEXT_KEY, current_context
from runyard.domain.new_run import NewRun, NewThread, TargetThread
from runyard.domain.priority import PrioritySettings
from runyard.domain.retention import ThreadTTLPolicy
from runyard.encryption.encrypted_json import opened, sealed, sealed_fields
from runyard.graphs.serialize import to_jsonable
from runyard.observability.tracing import Tracing
from runyard.schemas.runs import RunCreate
from runyard.services.run_priority import RunPriority
from runyard.services.threads import ttl_columns

if TYPE_CHECKING:
    from runyard.encryption.custom import CustomEncryption


def new_id() -> str:
    """A time-ordered UUID, as LangGraph Platform issues for runs and threads."""
    return str(uuid6())


@dataclass(frozen=True, slots=True)
class PendingRunRows:
    """Builds a new run's row on the thread it goes on: it inherits the thread's metadata in
    plain text and its settings (the assigned ones when the thread has none), then its JSON
    is sealed (encryption.path)."""

    new_runs: NewRuns
    body: RunCreate
    assistant: AssistantRecord
    stateless: bool
    stream_modes: list[str] | None
    idempotency_key: str | None
    request_hash: str | None
    configurable: dict[str, Any]
    priority: RunPriority

    async def row(self, thread: TargetThread, scheduled_at: Any) -> dict[str, Any]:
        """The run's row on `thread`, without its status (the lifecycle gives it)."""
        new_runs = self.new_runs
        settings = thread.settings or self.priority.settings
        stored = {"metadata": thread.metadata}
        metadata = (await opened(new_runs, "thread", stored, ("metadata",)))["metadata"]
        row = {
            **new_runs.run_row(
                self.body,
                self.assistant,
                replace(thread, metadata=metadata),
                self.stateless,
                self.stream_modes,
                scheduled_at,
                self.idempotency_key,
                self.request_hash,
                self.configurable,
            ),
            **_settings_columns(settings),
        }
        row["metadata"] = await sealed(new_runs, "run", "metadata", row["metadata"])
        row["kwargs"] = await sealed_fields(new_runs, "run", row["kwargs"], RUN_KWARGS_FIELDS)
        return row


def _settings_columns(settings: PrioritySettings) -> dict[str, Any]:
    return {"priority": settings.priority, "fairness_group": settings.fairness_group}


def _graph_metadata(assistant: AssistantRecord) -> dict[str, Any]:
    """What a run and its thread record of the graph and assistant they belong to."""
    return {"graph_id": assistant.graph_id, "assistant_id": assistant.assistant_id}


def _kwargs(
    body: RunCreate,
    assistant: AssistantRecord,
    stream_modes: list[str] | None,
    stateless: bool,
    configurable: dict[str, Any],
) -> dict[str, Any]:
    config = _merge_config(assistant.config, body.config or {})
    if configurable or "configurable" in config:
        config["configurable"] = {
            **without_reserved(config.get("configurable") or {}),
            **configurable,
        }
    context = _run_context(body, assistant)
    return to_jsonable(
        {
            "input": body.input,
            "command": body.command.model_dump(exclude_none=True) if body.command else None,
            "config": config,
            "context": context,
            "stream_mode": stream_modes or body.stream_modes(),
            "stream_subgraphs": body.stream_subgraphs,
            "stream_resumable": body.stream_resumable,
            "interrupt_before": body.interrupt_before,
            "interrupt_after": body.interrupt_after,
            "checkpoint": body.checkpoint,
            "checkpoint_id": body.checkpoint_id,
            "durability": body.durability,
            "webhook": body.webhook,
            "feedback_keys": body.feedback_keys,
            "graph_id": assistant.graph_id,
            "temporary": stateless,
            "subgraphs": body.stream_subgraphs,
            "resumable": body.stream_resumable,
        }
    )


def _run_context(body: RunCreate, assistant: AssistantRecord) -> dict[str, Any]:
    """The run's context: the assistant's, with the request's keys over it."""
    return {**assistant.context, **(body.context or {})}


def _merge_config(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    merged = copy.deepcopy(base)
    for key, value in override.items():
        if key == "configurable" and isinstance(value, dict):
            merged["configurable"] = {**(merged.get("configurable") or {}), **value}
        else:
            merged[key] = copy.deepcopy(value)
    return merged


class NewRuns:
    """Builds what the lifecycle needs to create a run: its thread and, on that thread, its row."""

    def __init__(
        self,
        thread_ttl: ThreadTTLPolicy,
        tracing: Tracing,
        langsmith_project: str | None,
        encryption: CustomEncryption | None,
    ) -> None:
        self.thread_ttl = thread_ttl
        self.tracing = tracing
        self.langsmith_project = langsmith_project
        self.encryption = encryption

    async def build_new_run(
        self,
        target_thread: str,
        body: RunCreate,
        rows: PendingRunRows,
        new_thread_metadata: dict[str, Any],
    ) -> NewRun:
        """What the lifecycle needs to create the run, its thread's JSON sealed."""
        assistant, stateless, priority = rows.assistant, rows.stateless, rows.priority
        graph_metadata = _graph_metadata(assistant)
        context = to_jsonable(_run_context(body, assistant))
        # A thread the run creates carries the run's metadata, as on LangGraph Platform: the
        # owner an auth handler stamped on the run is the thread's too.
        metadata = {**(body.metadata or {}), **new_thread_metadata, **graph_metadata}
        thread = NewThread(
            target_thread,
            metadata=await sealed(self, "thread", "metadata", metadata),
            context=await sealed(self, "thread", "context", context),
            columns={
                # A temporary thread goes with its run; a thread of its own gets the default TTL.
                **({} if stateless else ttl_columns(None, self.thread_ttl)),
                **(_settings_columns(priority.settings) if priority.assigned else {}),
            },
        )
        return NewRun(
            thread=thread,
            creates_thread=stateless or body.if_not_exists == "create",
            recreates_thread=body.if_not_exists == "create",
            strategy=body.multitask_strategy,
            after_seconds=body.after_seconds,
            idempotency_key=rows.idempotency_key,
            request_hash=rows.request_hash,
            assigned_priority=priority.settings if priority.assigned else None,
            graph_metadata=graph_metadata,
            rows=rows,
        )

    def run_row(
        self,
        body: RunCreate,
        assistant: AssistantRecord,
        thread: TargetThread,
        stateless: bool,
        stream_modes: list[str] | None,
        scheduled_at: Any,
        idempotency_key: str | None,
        request_hash: str | None,
        configurable: dict[str, Any],
    ) -> dict[str, Any]:
        """The row of a new run on `thread` (the lifecycle makes it pending)."""
        return {
            "run_id": new_id(),
            "thread_id": thread.thread_id,
            "assistant_id": assistant.assistant_id,
            "metadata": {
                **assistant.metadata,
                **(thread.metadata or {}),
                **_graph_metadata(assistant),
                **(body.metadata or {}),
                "assistant_id": assistant.assistant_id,
            },
            "kwargs": {
                **_kwargs(body, assistant, stream_modes, stateless, configurable),
                **self.tracing.run_kwargs(),
                # The caller's encryption context, for the worker to write the run's checkpoints
                # under (encryption.path); stored as LangGraph's server stores it.
                **({CONTEXT_KEY: current_context()} if self.encryption else {}),
            },
            "multitask_strategy": body.multitask_strategy,
            "scheduled_at": scheduled_at,
            "attempt": 0,
            "idempotency_key": idempotency_key,
            "request_hash": request_hash,
            "webhook": body.webhook,
            "on_completion": (body.on_completion or "delete") if stateless else None,
            "temporary": stateless,
            "langsmith_session_name": self.langsmith_project,
        }
