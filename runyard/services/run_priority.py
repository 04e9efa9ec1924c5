"""The priority settings a new run is created with (LangGraph's Priority API).

The thread's stored settings when it has some; else, with `priority.path` configured, what
the assign function returns, computed before the creating transaction (a user function
never runs while a thread row is locked) and stored by it only if the thread still has no
settings, so of two concurrent first runs one result is stored and both runs use it.
Without `priority.path`, every run gets priority 0 and nothing is stored on the thread;
its fairness group is "default", or what RUNYARD_FAIRNESS_KEY names: `langgraph_auth_user_id`
is the authenticated user's identity (the value the server sets in the run's `configurable`,
which no client can); any other name is a key of the run's metadata (the thread's, for a
thread the run creates), else the identity, else "default". A client writes its own metadata,
so with auth configured only the identity may name groups (`require_trusted_fairness_key`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from runyard.db import threads as threads_db
from runyard.db.engine import Sessions
from runyard.domain.assistant import AssistantRecord
from runyard.domain.configurable import AUTH_USER_ID_KEY
from runyard.domain.errors import ConfigError, InvalidInputError
from runyard.domain.priority import (
    DEFAULT_FAIRNESS_GROUP,
    FAIRNESS_GROUP_MAX_CHARS,
    PrioritySettings,
)
from runyard.domain.user import user_from_config
from runyard.project.priority import NewRunFacts, PriorityAssigner
from runyard.schemas.runs import RunCreate


@dataclass(frozen=True)
class RunPriority:
    """Settings for a new run, and whether its thread should store them."""

    settings: PrioritySettings
    # Assigned now: store on the thread if it still has none.
    assigned: bool


DEFAULTS = RunPriority(PrioritySettings(), assigned=False)


def keyed_group(
    key: str,
    run_metadata: Mapping[str, Any],
    thread_metadata: Mapping[str, Any],
    configurable: Mapping[str, Any],
) -> str:
    """The fairness group RUNYARD_FAIRNESS_KEY names for a run (see the module)."""
    value = None if key == AUTH_USER_ID_KEY else run_metadata.get(key, thread_metadata.get(key))
    if value is None or value == "":
        value = configurable.get(AUTH_USER_ID_KEY) or DEFAULT_FAIRNESS_GROUP
    group = str(value)
    if len(group) > FAIRNESS_GROUP_MAX_CHARS:
        raise InvalidInputError(
            f"metadata.{key} is the fairness group (RUNYARD_FAIRNESS_KEY) and is "
            f"{len(group)} characters long; at most {FAIRNESS_GROUP_MAX_CHARS} are allowed"
        )
    return group


def require_trusted_fairness_key(key: str | None, auth_configured: bool) -> None:
    """ConfigError when RUNYARD_FAIRNESS_KEY names a metadata key while auth is configured:
    a client writes its run's metadata, and would choose another user's fairness group."""
    if key is None or key == AUTH_USER_ID_KEY or not auth_configured:
        return
    raise ConfigError(
        f"RUNYARD_FAIRNESS_KEY={key} names a run metadata key, which a client chooses: with "
        f"auth configured, a user could put runs in another user's fairness group and take "
        f"its slots. Set RUNYARD_FAIRNESS_KEY={AUTH_USER_ID_KEY} for one group per "
        "authenticated user, or assign groups from trusted data in a priority.path function "
        "(and unset RUNYARD_FAIRNESS_KEY)"
    )


class RunPriorities:
    """What a new run is dispatched by: its priority and fairness group."""

    def __init__(
        self,
        assigner: PriorityAssigner | None,
        fairness_key: str | None,
        autocommit: Sessions,
    ) -> None:
        self.assigner = assigner
        self.fairness_key = fairness_key
        self.autocommit = autocommit

    async def for_new_run(
        self,
        thread_id: str | None,
        body: RunCreate,
        assistant: AssistantRecord,
        new_thread_metadata: Mapping[str, Any],
        configurable: Mapping[str, Any],
    ) -> RunPriority:
        """What a run about to be created on `thread_id` (None: a thread of its own, not named
        by the client) is dispatched by; PriorityAssignError when the assign function fails."""
        assigner = self.assigner
        if assigner is None:
            key = self.fairness_key
            if key is None:
                return DEFAULTS
            group = keyed_group(key, body.metadata or {}, new_thread_metadata, configurable)
            return RunPriority(PrioritySettings(fairness_group=group), assigned=False)
        thread_metadata: Mapping[str, Any] = new_thread_metadata
        if thread_id is not None:
            async with self.autocommit() as session:
                thread = await threads_db.get_thread(session, thread_id)
            if thread is not None:
                known = thread.settings
                if known is not None:
                    return RunPriority(known, assigned=False)
                thread_metadata = thread.metadata or {}
            elif body.if_not_exists != "create":
                return DEFAULTS  # no such thread: the creating transaction answers 404
        metadata = body.metadata or {}
        cron_id = metadata.get("cron_id")
        facts = NewRunFacts(
            user=user_from_config(configurable),
            thread_id=thread_id,
            thread_metadata=thread_metadata,
            assistant_id=assistant.assistant_id,
            graph_id=assistant.graph_id,
            assistant_metadata=assistant.metadata,
            run_metadata=metadata,
            cron_id=str(cron_id) if cron_id is not None else None,
        )
        return RunPriority(await assigner.assign(facts), assigned=True)
