"""Checks that a caller may see one thread or assistant; hidden objects answer 404."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from runyard.auth.handlers import Caller, Filter
from runyard.domain.errors import NotFoundError
from runyard.services import assistants as assistants_service
from runyard.services import crons as crons_service
from runyard.services import threads as threads_service
from runyard.services.thread_state import thread_not_found

if TYPE_CHECKING:
    from runyard.runtime import Runtime


def metadata_matches(metadata: dict[str, Any] | None, spec: Filter) -> bool:
    """Whether metadata satisfies an auth filter (plain values, `$eq`, `$contains`)."""
    metadata = metadata or {}
    for key, wanted in spec.items():
        if key not in metadata:
            return False
        actual = metadata[key]
        if isinstance(wanted, dict) and "$contains" in wanted:
            items = wanted["$contains"]
            needed = items if isinstance(items, list) else [items]
            if not isinstance(actual, list) or any(item not in actual for item in needed):
                return False
        elif isinstance(wanted, dict) and "$eq" in wanted:
            if actual != wanted["$eq"]:
                return False
        elif not _contains(actual, wanted):
            return False
    return True


def _contains(actual: Any, wanted: Any) -> bool:
    # JSON containment, as the SQL filter applies it on PostgreSQL.
    if isinstance(wanted, dict):
        return isinstance(actual, dict) and all(
            k in actual and _contains(actual[k], v) for k, v in wanted.items()
        )
    return bool(actual == wanted)


async def require_thread(
    runtime: Runtime,
    caller: Caller,
    thread_id: str,
    action: str,
    value: dict[str, Any] | None = None,
    *,
    missing_ok: bool = False,
) -> None:
    """Authorize `action` on the thread; NotFoundError if the caller may not see it.

    With `missing_ok`, a thread that does not exist yet passes (a run may create it).
    """
    if caller.auth is None:
        return
    spec = await caller.authorize("threads", action, value or {"thread_id": thread_id})
    if spec is None:
        return
    try:
        thread = await threads_service.get_thread(runtime, thread_id)
    except NotFoundError:
        if missing_ok:
            return
        raise
    if not metadata_matches(thread["metadata"], spec):
        raise thread_not_found(thread_id)


async def require_assistant(
    runtime: Runtime,
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
    assistant = await assistants_service.get_assistant(runtime, assistant_id)
    if not metadata_matches(assistant["metadata"], spec):
        raise NotFoundError(f"assistant {assistant_id} not found")


async def require_cron(runtime: Runtime, caller: Caller, cron_id: str, action: str) -> None:
    """Authorize `action` on the cron; NotFoundError if the caller may not see it."""
    if caller.auth is None:
        return
    spec = await caller.authorize("crons", action, {"cron_id": cron_id})
    if spec is None:
        return
    cron = await crons_service.get_cron(runtime, cron_id)
    if not metadata_matches(cron["metadata"], spec):
        raise NotFoundError(f"cron {cron_id} not found")
