"""Checks that a caller may see one thread or assistant; hidden objects answer 404."""

from __future__ import annotations

from typing import Any

from runyard.auth.handlers import Caller, Filter
from runyard.domain.auth_filters import (
    contained_items,
    field_operator,
    filter_groups,
    unknown_operator,
)
from runyard.domain.errors import NotFoundError
from runyard.services.assistants import AssistantService
from runyard.services.crons import CronService
from runyard.services.thread_state import thread_not_found
from runyard.services.threads import ThreadService


def metadata_matches(metadata: dict[str, Any] | None, spec: Filter) -> bool:
    """Whether metadata satisfies an auth filter (`runyard.domain.auth_filters`).

    The same meaning as `runyard.db.dialect.json_filter` gives it in SQL.
    """
    metadata = metadata or {}
    for key, wanted in spec.items():
        if key == "$or":
            if not any(metadata_matches(metadata, g) for g in filter_groups(key, wanted)):
                return False
        elif key == "$and":
            if not all(metadata_matches(metadata, g) for g in filter_groups(key, wanted)):
                return False
        elif key.startswith("$"):
            raise unknown_operator(key)
        elif key not in metadata:
            return False
        else:
            operator, operand = field_operator(wanted)
            actual = metadata[key]
            if operator == "$eq" and not json_equal(actual, operand):
                return False
            if operator == "$contains" and not (
                isinstance(actual, list)
                and all(
                    any(json_equal(a, item) for a in actual) for item in contained_items(operand)
                )
            ):
                return False
    return True


def json_equal(actual: Any, wanted: Any) -> bool:
    """Equality of JSON values as the databases compare them: `true` is not `1`."""
    if isinstance(actual, bool) or isinstance(wanted, bool):
        return type(actual) is type(wanted) and actual == wanted
    if isinstance(actual, dict) and isinstance(wanted, dict):
        return actual.keys() == wanted.keys() and all(
            json_equal(actual[k], wanted[k]) for k in actual
        )
    if isinstance(actual, list) and isinstance(wanted, list):
        return len(actual) == len(wanted) and all(map(json_equal, actual, wanted))
    if isinstance(actual, dict | list) or isinstance(wanted, dict | list):
        return False
    return bool(actual == wanted)


async def require_thread(
    threads: ThreadService,
    caller: Caller,
    thread_id: str,
    action: str,
    value: dict[str, Any] | None = None,
    *,
    missing_ok: bool = False,
) -> Filter | None:
    """Authorize `action` on the thread; NotFoundError if the caller may not see it. The
    handler's filter, if it returned one.

    With `missing_ok`, a thread that does not exist yet passes (a run may create it).
    """
    if caller.auth is None:
        return None
    spec = await caller.authorize("threads", action, value or {"thread_id": thread_id})
    if spec is None:
        return None
    try:
        thread = await threads.get_thread(thread_id)
    except NotFoundError:
        if missing_ok:
            return spec
        raise
    if not metadata_matches(thread.metadata, spec):
        raise thread_not_found(thread_id)
    return spec


async def require_assistant(
    assistants: AssistantService,
    caller: Caller,
    assistant_id: str,
    action: str,
    value: dict[str, Any] | None = None,
) -> None:
    """Authorize `action` on the assistant; NotFoundError if the caller may not see it."""
    if caller.auth is None:
        return
    spec = await caller.authorize("assistants", action, value or {"assistant_id": assistant_id})
    if spec is None:
        return
    assistant = await assistants.get_assistant(assistant_id)
    if not metadata_matches(assistant.metadata, spec):
        raise NotFoundError(f"assistant {assistant_id} not found")


async def require_cron(
    crons: CronService,
    caller: Caller,
    cron_id: str,
    action: str,
    value: dict[str, Any] | None = None,
) -> None:
    """Authorize `action` on the cron; NotFoundError if the caller may not see it."""
    if caller.auth is None:
        return
    spec = await caller.authorize("crons", action, value or {"cron_id": cron_id})
    if spec is None:
        return
    cron = await crons.get_cron(cron_id)
    if not metadata_matches(cron.metadata, spec):
        raise NotFoundError(f"cron {cron_id} not found")
