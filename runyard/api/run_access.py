"""Authorizing a new run, on every surface that creates one (REST, the thread session, MCP,
A2A): the thread and assistant the caller must see, what the handlers stamp, and the scope of
its Idempotency-Key."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from runyard.auth.guards import require_assistant, require_thread
from runyard.auth.handlers import Caller, rewritten, sent_copy
from runyard.auth.idempotency import stored_idempotency_key
from runyard.schemas.runs import RunCreate
from runyard.services.assistants import AssistantService
from runyard.services.threads import ThreadService

# What a create_run handler may change in `kwargs`, as LangGraph obeys it.
RUN_EDITABLE = ("input", "command", "config", "context")


@dataclass(frozen=True, slots=True)
class NewRunGrant:
    """What authorizing a new run gives: the metadata the threads create handler stamps on a
    thread the run may create, and the Idempotency-Key in the form stored for this caller."""

    thread_metadata: dict[str, Any] | None
    idempotency_key: str | None


async def authorize_new_run(
    threads: ThreadService,
    assistants: AssistantService,
    caller: Caller,
    thread_id: str | None,
    body: RunCreate,
) -> dict[str, Any] | None:
    """`grant_new_run` without a key: the metadata for a thread the run may create."""
    grant = await grant_new_run(threads, assistants, caller, thread_id, body, None)
    return grant.thread_metadata


async def grant_new_run(
    threads: ThreadService,
    assistants: AssistantService,
    caller: Caller,
    thread_id: str | None,
    body: RunCreate,
    key: str | None,
) -> NewRunGrant:
    """The caller must see the thread (when it exists) and the assistant of a new run.

    Metadata the create_run handler stamps goes on the run (and a thread it creates); the
    filter it returns scopes the Idempotency-Key `key` (runyard/auth/idempotency.py).
    """
    if caller.auth is None:
        return NewRunGrant(None, key)
    value: dict[str, Any] = {
        "thread_id": thread_id,
        "assistant_id": body.assistant_id,
        "metadata": body.metadata or {},
        "kwargs": body.model_dump(mode="json"),
    }
    sent = sent_copy(value["kwargs"])
    if thread_id is None:
        run_filter = await caller.authorize("threads", "create_run", value)
    else:
        missing_ok = body.if_not_exists == "create"
        run_filter = await require_thread(
            threads, caller, thread_id, "create_run", value, missing_ok=missing_ok
        )
    if value.get("metadata"):
        body.metadata = dict(value["metadata"])
    # What the run executes with, as the handler left it (a configurable stamped, say).
    changed = rewritten(body, sent, value["kwargs"], RUN_EDITABLE)
    for name in RUN_EDITABLE:
        setattr(body, name, getattr(changed, name))
    await require_assistant(assistants, caller, body.assistant_id, "read")
    stored_key = stored_idempotency_key(caller, run_filter, key)
    if thread_id is None or body.if_not_exists != "create":
        return NewRunGrant(None, stored_key)
    new_thread: dict[str, Any] = {"thread_id": thread_id, "metadata": {}, "if_exists": "do_nothing"}
    await caller.authorize("threads", "create", new_thread)
    return NewRunGrant(dict(new_thread["metadata"]), stored_key)
