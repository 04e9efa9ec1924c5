"""The priority settings a new run is created with (LangGraph's Priority API).

The thread's stored settings when it has some; else, with `priority.path` configured, what
the assign function returns, computed before the creating transaction (a user function
never runs while a thread row is locked) and stored by it only if the thread still has no
settings, so of two concurrent first runs one result is stored and both runs use it.
Without `priority.path`, every run gets the defaults and nothing is stored on the thread.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from runyard.db import threads as threads_db
from runyard.domain.priority import PrioritySettings
from runyard.domain.user import user_from_config
from runyard.graphs.priority import NewRunFacts
from runyard.schemas.runs import RunCreate

if TYPE_CHECKING:
    from runyard.runtime import Runtime


@dataclass(frozen=True)
class RunPriority:
    """Settings for a new run, and whether its thread should store them."""

    settings: PrioritySettings
    # Assigned now: store on the thread if it still has none.
    assigned: bool


DEFAULTS = RunPriority(PrioritySettings(), assigned=False)


def stored_settings(thread: Mapping[str, Any]) -> PrioritySettings | None:
    """A thread row's settings, or None when it has none yet."""
    if thread.get("priority") is None:
        return None
    return PrioritySettings(int(thread["priority"]), str(thread["fairness_group"]))


async def priority_for_new_run(
    runtime: Runtime,
    thread_id: str | None,
    body: RunCreate,
    assistant: Mapping[str, Any],
    new_thread_metadata: Mapping[str, Any],
    configurable: Mapping[str, Any],
) -> RunPriority:
    """What a run about to be created on `thread_id` (None: a thread of its own, not named
    by the client) is dispatched by; PriorityAssignError when the assign function fails."""
    assigner = runtime.priority
    if assigner is None:
        return DEFAULTS
    thread_metadata: Mapping[str, Any] = new_thread_metadata
    if thread_id is not None:
        async with runtime.autocommit() as session:
            thread = await threads_db.get_thread(session, thread_id)
        if thread is not None:
            known = stored_settings(thread)
            if known is not None:
                return RunPriority(known, assigned=False)
            thread_metadata = thread["metadata"] or {}
        elif body.if_not_exists != "create":
            return DEFAULTS  # no such thread: the creating transaction answers 404
    metadata = body.metadata or {}
    cron_id = metadata.get("cron_id")
    facts = NewRunFacts(
        user=user_from_config(configurable),
        thread_id=thread_id,
        thread_metadata=thread_metadata,
        assistant_id=str(assistant["assistant_id"]),
        graph_id=str(assistant["graph_id"]),
        assistant_metadata=assistant.get("metadata") or {},
        run_metadata=metadata,
        cron_id=str(cron_id) if cron_id is not None else None,
    )
    return RunPriority(await assigner.assign(facts), assigned=True)
