"""Run use cases: create (with multitask strategies), read, list, delete, cancel."""

from __future__ import annotations

import copy
import hashlib
import json
import logging
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from langgraph.checkpoint.base.id import uuid6
from sqlalchemy.exc import IntegrityError

from runyard.db import runs as runs_db
from runyard.db import threads as threads_db
from runyard.db.dialect import database_now
from runyard.domain.configurable import without_reserved
from runyard.domain.encrypted_fields import RUN_KWARGS_FIELDS
from runyard.domain.encryption_context import CONTEXT_KEY, current_context
from runyard.domain.errors import ConflictError, InvalidInputError, NotFoundError
from runyard.domain.priority import PrioritySettings
from runyard.domain.status import TERMINAL_RUN_STATUSES, RunStatus
from runyard.graphs.checkpointer import delete_run_checkpoints
from runyard.graphs.serialize import to_jsonable
from runyard.lifecycle import StrategyEffects
from runyard.schemas.runs import RunCreate
from runyard.services.assistants import get_assistant
from runyard.services.encrypted_json import opened, opened_run, sealed, sealed_fields
from runyard.services.run_priority import RunPriority, priority_for_new_run, stored_settings
from runyard.services.threads import ttl_columns

if TYPE_CHECKING:
    from runyard.runtime import Runtime

log = logging.getLogger("runyard.runs")


def new_id() -> str:
    """A time-ordered UUID, as LangGraph Platform issues for runs and threads."""
    return str(uuid6())


async def create_run(
    runtime: Runtime,
    thread_id: str | None,
    body: RunCreate,
    *,
    stream_modes: list[str] | None = None,
    idempotency_key: str | None = None,
    new_thread_metadata: dict[str, Any] | None = None,
    on_created: Callable[[str], Awaitable[object]] | None = None,
    configurable: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Validate, apply the thread's multitask strategy, commit a pending run, then dispatch it.

    `new_thread_metadata` goes on a thread the run creates (`if_not_exists="create"`).
    `configurable` is what the server adds to the run's `configurable` (the authenticated
    user, chosen request headers); a client cannot set those keys itself.
    `on_created(run_id)` is awaited between the commit and the dispatch of a new run (not
    for an existing run answered instead): nothing can have executed it yet.
    """
    assistant = await get_assistant(runtime, body.assistant_id)
    stateless = thread_id is None
    if stateless:
        _check_stateless(body)
    if body.webhook is not None:
        await runtime.webhook_guard.check(body.webhook)
    target_thread = thread_id or new_id()
    # Only an Idempotency-Key ever compares requests: hash the body only then.
    request_hash = _request_hash(thread_id, body) if idempotency_key else None
    if idempotency_key:
        existing = await _idempotent_replay(runtime, idempotency_key, request_hash)
        if existing is not None:
            return existing
    # Before anything is written: an assign function that fails leaves nothing behind.
    priority = await priority_for_new_run(
        runtime, thread_id, body, assistant, new_thread_metadata or {}, configurable or {}
    )
    try:
        row, effects, created = await _insert_run(
            runtime,
            target_thread,
            stateless,
            body,
            assistant,
            stream_modes,
            idempotency_key,
            request_hash,
            new_thread_metadata or {},
            configurable or {},
            priority,
        )
    except IntegrityError:
        # Another instance committed the same Idempotency-Key first: answer with its run.
        replay = await _idempotent_replay(runtime, idempotency_key, request_hash)
        if replay is None:
            raise
        return replay
    if not created:
        return await run_wire(runtime, row)
    if on_created is not None:
        await on_created(row["run_id"])
    await runtime.lifecycle.after_strategy(effects)
    await runtime.queue.push(
        row["run_id"], body.after_seconds or 0.0, row["priority"], row["fairness_group"]
    )
    log.info("run_created run_id=%s thread_id=%s", row["run_id"], target_thread)
    return await run_wire(runtime, row)


async def create_batch(
    runtime: Runtime, bodies: list[RunCreate], configurable: dict[str, Any] | None = None
) -> list[dict[str, Any]]:
    """Create one stateless background run per body, in order (each given `configurable`,
    as `create_run`).

    Every body is checked (assistant, stateless-only fields) before the first run is
    created, so a bad payload anywhere in the batch creates none.
    """
    for index, body in enumerate(bodies):
        try:
            await get_assistant(runtime, body.assistant_id)
            _check_stateless(body)
            if body.webhook is not None:
                await runtime.webhook_guard.check(body.webhook)
        except (NotFoundError, InvalidInputError) as exc:
            raise type(exc)(f"batch payload {index}: {exc}") from exc
    created = [await create_run(runtime, None, body, configurable=configurable) for body in bodies]
    log.info("run_batch_created runs=%s", len(created))
    return created


def _check_stateless(body: RunCreate) -> None:
    if body.command is not None and body.command.resume is not None:
        raise InvalidInputError("you must provide a thread_id when resuming an interrupted run")
    if body.checkpoint or body.checkpoint_id:
        raise InvalidInputError("checkpoint and checkpoint_id need a thread_id (stateful run)")


async def _idempotent_replay(
    runtime: Runtime, key: str | None, request_hash: str | None
) -> dict[str, Any] | None:
    if not key:
        return None
    async with runtime.autocommit() as session:
        existing = await runs_db.get_run_by_idempotency_key(session, key)
    if existing is None:
        return None
    if existing["request_hash"] != request_hash:
        raise ConflictError(
            "this Idempotency-Key was already used with a different request; "
            "use a new key for a new run"
        )
    return await run_wire(runtime, existing)


async def _insert_run(
    runtime: Runtime,
    target_thread: str,
    stateless: bool,
    body: RunCreate,
    assistant: dict[str, Any],
    stream_modes: list[str] | None,
    idempotency_key: str | None,
    request_hash: str | None,
    new_thread_metadata: dict[str, Any],
    configurable: dict[str, Any],
    priority: RunPriority,
) -> tuple[Any, StrategyEffects, bool]:
    effects = StrategyEffects()
    thread_metadata = _graph_metadata(assistant)
    context = to_jsonable(_run_context(body, assistant))
    creating = stateless or body.if_not_exists == "create"
    # A new thread is created busy, with its run: it has no other run, so there is nothing
    # to lock, merge or apply a multitask strategy to. It carries the run's metadata, as on
    # LangGraph Platform: the owner an auth handler stamped on the run is the thread's too.
    new_thread_plain = {**(body.metadata or {}), **new_thread_metadata, **thread_metadata}
    new_thread = {
        "thread_id": target_thread,
        "metadata": await sealed(runtime, "thread", "metadata", new_thread_plain),
        "config": {},
        "status": "busy",
        "values": None,
        "interrupts": {},
        "context": await sealed(runtime, "thread", "context", context),
        # A temporary thread goes with its run; a thread of its own gets the default TTL.
        **({} if stateless else ttl_columns(None, runtime.thread_ttl)),
        **(_settings_columns(priority.settings) if priority.assigned else {}),
    }

    async def run_row(thread: dict[str, Any], scheduled_at: Any) -> dict[str, Any]:
        # The run inherits the thread's metadata in plain text, and encrypts its own whole.
        settings = stored_settings(thread) or priority.settings
        row = {
            **_run_row(
                runtime,
                body,
                assistant,
                await opened(runtime, "thread", thread, ("metadata",)),
                stateless,
                stream_modes,
                scheduled_at,
                idempotency_key,
                request_hash,
                configurable,
            ),
            **_settings_columns(settings),
        }
        row["metadata"] = await sealed(runtime, "run", "metadata", row["metadata"])
        row["kwargs"] = await sealed_fields(runtime, "run", row["kwargs"], RUN_KWARGS_FIELDS)
        return row

    if creating and not idempotency_key and not body.after_seconds:
        # The common case (every stateless run) in one statement on PostgreSQL.
        first_row = await run_row(new_thread, None)
        row = await runtime.lifecycle.atomic(
            lambda session: runs_db.insert_run_on_new_thread(session, new_thread, first_row)
        )
        if row is not None:
            return row, effects, True
        creating = False  # the thread exists: read and lock it below
    if not creating:
        await _roll_back_checkpoints(runtime, target_thread, body.multitask_strategy)

    async def create(session: Any) -> tuple[Any, bool]:
        # Run again from the start when it lost to a concurrent transaction.
        effects.ended.clear()
        effects.cancel_running.clear()
        created = await threads_db.insert_thread(session, new_thread) if creating else None
        thread = created or await runs_db.lock_thread_for_new_run(session, target_thread)
        rounds = 0
        while thread is None and body.if_not_exists == "create":
            # Deleted since the statement before found it: create it, as the request asks,
            # or join the one another request created meanwhile. On PostgreSQL other clients
            # may delete and create it again between any two statements, so go round again.
            if rounds == _THREAD_CHURN_ROUNDS:
                raise ConflictError(
                    f"thread {target_thread} was deleted and created again by other requests "
                    "while this run was being created; retry the request"
                )
            rounds += 1
            created = await threads_db.insert_thread(session, new_thread)
            thread = created or await runs_db.lock_thread_for_new_run(session, target_thread)
        if thread is None:
            raise NotFoundError(
                f"thread {target_thread} not found; create it first or pass if_not_exists='create'"
            )
        if thread.pop("deleted_with_run", False):
            # Deleting the thread would take this run with it: accepted, then lost.
            raise ConflictError(
                f"thread {target_thread} is the temporary thread of a stateless run and is "
                "deleted when that run ends; create a thread of your own for this run"
            )
        if idempotency_key:
            # Checked again in the transaction: a concurrent retry committed meanwhile.
            existing = await runs_db.get_run_by_idempotency_key(session, idempotency_key)
            if existing is not None:
                if existing["request_hash"] != request_hash:
                    raise ConflictError(
                        "this Idempotency-Key was already used with a different request; "
                        "use a new key for a new run"
                    )
                return existing, False
        if created is None:
            await runtime.lifecycle.apply_strategy(
                session, target_thread, body.multitask_strategy, effects
            )
        if priority.assigned and created is None and stored_settings(thread) is None:
            settings = priority.settings
            await threads_db.set_priority_settings(
                session, target_thread, settings.priority, settings.fairness_group
            )
        scheduled_at = await _scheduled_at(session, body.after_seconds)
        row = await runs_db.insert_run(session, await run_row(thread, scheduled_at))
        if created is None:
            await threads_db.mark_busy(
                session,
                target_thread,
                {**(thread["metadata"] or {}), **thread_metadata},
                new_thread["context"],
            )
        return row, True

    # The creating transaction locks the thread row first (lock_thread_for_new_run).
    row, inserted = await runtime.lifecycle.transaction(create)
    return row, effects, inserted


# How often a create that may make its thread finds it deleted, then created by another
# request, before it answers 409: each round is another client's committed delete and create.
_THREAD_CHURN_ROUNDS = 8


def _settings_columns(settings: PrioritySettings) -> dict[str, Any]:
    return {"priority": settings.priority, "fairness_group": settings.fairness_group}


def _graph_metadata(assistant: dict[str, Any]) -> dict[str, Any]:
    """What a run and its thread record of the graph and assistant they belong to."""
    return {"graph_id": assistant["graph_id"], "assistant_id": assistant["assistant_id"]}


def _run_row(
    runtime: Runtime,
    body: RunCreate,
    assistant: dict[str, Any],
    thread: dict[str, Any],
    stateless: bool,
    stream_modes: list[str] | None,
    scheduled_at: Any,
    idempotency_key: str | None,
    request_hash: str | None,
    configurable: dict[str, Any],
) -> dict[str, Any]:
    """The row of a new pending run on `thread`."""
    return {
        "run_id": new_id(),
        "thread_id": thread["thread_id"],
        "assistant_id": assistant["assistant_id"],
        "status": RunStatus.PENDING.value,
        "metadata": {
            **(assistant.get("metadata") or {}),
            **(thread["metadata"] or {}),
            **_graph_metadata(assistant),
            **(body.metadata or {}),
            "assistant_id": assistant["assistant_id"],
        },
        "kwargs": {
            **_kwargs(body, assistant, stream_modes, stateless, configurable),
            **runtime.tracing.run_kwargs(),
            # The caller's encryption context, for the worker to write the run's checkpoints
            # under (encryption.path); stored as LangGraph's server stores it.
            **({CONTEXT_KEY: current_context()} if runtime.encryption else {}),
        },
        "multitask_strategy": body.multitask_strategy,
        "scheduled_at": scheduled_at,
        "attempt": 0,
        "idempotency_key": idempotency_key,
        "request_hash": request_hash,
        "webhook": body.webhook,
        "on_completion": (body.on_completion or "delete") if stateless else None,
        "temporary": stateless,
        "langsmith_session_name": runtime.langsmith_project,
    }


async def _scheduled_at(session: Any, after_seconds: float | None) -> Any:
    if not after_seconds:
        return None
    return await database_now(session) + timedelta(seconds=after_seconds)


async def _roll_back_checkpoints(runtime: Runtime, thread_id: str, strategy: str) -> None:
    """Before a rollback deletes the thread's pending runs: remove the checkpoints of those
    that already ran (handed back or reaped, attempt >= 1), so the next run starts from
    the state before them.

    Done ahead of the transaction that deletes the runs (the checkpoints are written on
    connections of their own, outside it): if this fails, nothing is committed and the
    request can be retried. A run claimed meanwhile is rolled back by its own attempt,
    which removes the same checkpoints.
    """
    if strategy != "rollback":
        return
    async with runtime.autocommit() as session:
        active = await runs_db.active_runs(session, thread_id)
    for run in active:
        if run["status"] == RunStatus.PENDING.value and run["attempt"] >= 1:
            await delete_run_checkpoints(runtime.checkpointer, thread_id, run["run_id"])


def _kwargs(
    body: RunCreate,
    assistant: dict[str, Any],
    stream_modes: list[str] | None,
    stateless: bool,
    configurable: dict[str, Any],
) -> dict[str, Any]:
    config = _merge_config(assistant.get("config") or {}, body.config or {})
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
            "graph_id": assistant["graph_id"],
            "temporary": stateless,
            "subgraphs": body.stream_subgraphs,
            "resumable": body.stream_resumable,
        }
    )


def _run_context(body: RunCreate, assistant: dict[str, Any]) -> dict[str, Any]:
    """The run's context: the assistant's, with the request's keys over it."""
    return {**(assistant.get("context") or {}), **(body.context or {})}


def _merge_config(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    merged = copy.deepcopy(base)
    for key, value in override.items():
        if key == "configurable" and isinstance(value, dict):
            merged["configurable"] = {**(merged.get("configurable") or {}), **value}
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def _request_hash(thread_id: str | None, body: RunCreate) -> str:
    canonical = json.dumps(
        {"thread_id": thread_id, "body": body.model_dump(mode="json")}, sort_keys=True
    )
    return hashlib.sha256(canonical.encode()).hexdigest()


async def run_wire(runtime: Runtime, row: Any) -> dict[str, Any]:
    """`to_wire` of a stored run, its JSON decrypted (encryption.path)."""
    return to_wire(await opened_run(runtime, row))


def to_wire(row: Any) -> dict[str, Any]:
    """The Agent Protocol view of a run row."""
    return {
        "run_id": row["run_id"],
        "thread_id": row["thread_id"],
        "assistant_id": row["assistant_id"],
        "created_at": row["created_at"].isoformat(),
        "updated_at": row["updated_at"].isoformat(),
        "status": row["status"],
        "metadata": row["metadata"] or {},
        "kwargs": {k: v for k, v in (row["kwargs"] or {}).items() if k != CONTEXT_KEY},
        "multitask_strategy": row["multitask_strategy"],
        "langsmith_session_name": row["langsmith_session_name"],
        "held_back": row.get("held_back"),
    }


async def get_run(runtime: Runtime, thread_id: str | None, run_id: str) -> dict[str, Any]:
    """A run by id, or NotFoundError."""
    async with runtime.autocommit() as session:
        row = await runs_db.get_run(session, run_id, thread_id)
    if row is None:
        raise NotFoundError(
            f"run {run_id} not found" + (f" in thread {thread_id}" if thread_id else "")
        )
    return dict(row)


async def list_runs(
    runtime: Runtime, thread_id: str, limit: int, offset: int, status: str | None
) -> list[dict[str, Any]]:
    """A thread's runs, newest first."""
    async with runtime.autocommit() as session:
        if await threads_db.get_thread(session, thread_id) is None:
            raise NotFoundError(f"thread {thread_id} not found")
        rows = await runs_db.list_runs(session, thread_id, limit, offset, status)
    return [await run_wire(runtime, r) for r in rows]


async def delete_run(runtime: Runtime, thread_id: str, run_id: str) -> None:
    """Delete a run; one still executing is stopped first and records nothing more."""
    await runtime.lifecycle.delete_run(thread_id, run_id)


async def cancel_run(
    runtime: Runtime, thread_id: str | None, run_id: str, action: str
) -> dict[str, Any]:
    """Record a cancel durably, then deliver it to the executing instance.

    Returns what happened: `delivered` is False when no executor acknowledged the message
    at once; the recorded flag then stops the run at its next lease renewal.
    """
    run = await get_run(runtime, thread_id, run_id)
    status = RunStatus(run["status"])
    if status in TERMINAL_RUN_STATUSES:
        raise ConflictError(
            f"run {run_id} already finished with status '{status.value}'; nothing to cancel"
        )
    pending, delivered = await runtime.lifecycle.cancel(run, action)
    log.info("run_cancel_requested run_id=%s action=%s delivered=%s", run_id, action, delivered)
    heartbeat = runtime.settings.heartbeat_interval_seconds
    return {
        "run_id": run_id,
        "thread_id": run["thread_id"],
        "action": action,
        "was": status.value,
        "delivered": delivered,
        "detail": "the run had not started; it ends interrupted"
        if pending
        else "the executing instance received the cancel; the run stops now"
        if delivered
        else "the cancel is recorded but no instance acknowledged it yet; it stops the run at "
        f"the executor's next lease renewal (every {heartbeat:g} s) or, if that instance "
        "is gone, when its lease expires",
    }


async def cancel_many(
    runtime: Runtime,
    thread_id: str | None,
    run_ids: list[str] | None,
    status: str | None,
    action: str,
) -> int:
    """Cancel the chosen active runs; returns how many were cancelled."""
    async with runtime.autocommit() as session:
        rows = await runs_db.find_active_runs(session, thread_id, run_ids, status)
    cancelled = 0
    for row in rows:
        try:
            await cancel_run(runtime, row["thread_id"], row["run_id"], action)
            cancelled += 1
        except (ConflictError, NotFoundError):
            continue  # finished meanwhile
    if run_ids and not cancelled and not rows:
        raise NotFoundError("no matching active runs to cancel; check the thread and run ids")
    return cancelled
