"""A thread's priority settings, as LangGraph's Priority API (langgraph-sdk 0.4.14) defines
them: `priority` from -5 (runs first) to 5 (runs last), default 0, and `fairness_group`, at
most 256 characters, default "default" (an empty string too)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from runyard.domain.errors import RunyardError

PRIORITY_FIRST = -5
PRIORITY_LAST = 5
DEFAULT_PRIORITY = 0
DEFAULT_FAIRNESS_GROUP = "default"
FAIRNESS_GROUP_MAX_CHARS = 256
_KEYS = frozenset({"priority", "fairness_group"})


class PriorityAssignError(RunyardError):
    """The deployment's `@priority.assign` function raised or returned unusable settings:
    the run is not created (a fault of the server's configuration, not of the request)."""

    status_code = 500


@dataclass(frozen=True)
class PrioritySettings:
    """What a thread's runs are dispatched by."""

    priority: int = DEFAULT_PRIORITY
    fairness_group: str = DEFAULT_FAIRNESS_GROUP


def settings_from(returned: Any, where: str) -> PrioritySettings:
    """Validate what an assign function returned (`where` names it in errors): None or a
    mapping of the two optional keys, each None for its default."""
    if returned is None:
        return PrioritySettings()
    if not isinstance(returned, Mapping):
        raise PriorityAssignError(
            f"{where} returned {type(returned).__name__}; it must return a PrioritySettings "
            "dict ({'priority': -5..5, 'fairness_group': str}) or None"
        )
    unknown = sorted(set(returned) - _KEYS)
    if unknown:
        raise PriorityAssignError(
            f"{where} returned the key {unknown[0]!r}; PrioritySettings has only "
            "'priority' and 'fairness_group'"
        )
    priority = returned.get("priority")
    if priority is None:
        priority = DEFAULT_PRIORITY
    elif isinstance(priority, bool) or not isinstance(priority, int):
        raise PriorityAssignError(
            f"{where} returned priority {priority!r}; it must be an integer from "
            f"{PRIORITY_FIRST} (first) to {PRIORITY_LAST} (last)"
        )
    elif not PRIORITY_FIRST <= priority <= PRIORITY_LAST:
        raise PriorityAssignError(
            f"{where} returned priority {priority}; it must be from {PRIORITY_FIRST} "
            f"(first) to {PRIORITY_LAST} (last)"
        )
    group = returned.get("fairness_group")
    if group is None or group == "":
        group = DEFAULT_FAIRNESS_GROUP
    elif not isinstance(group, str):
        raise PriorityAssignError(
            f"{where} returned fairness_group {group!r}; it must be a string of at most "
            f"{FAIRNESS_GROUP_MAX_CHARS} characters"
        )
    elif len(group) > FAIRNESS_GROUP_MAX_CHARS:
        raise PriorityAssignError(
            f"{where} returned a fairness_group of {len(group)} characters; at most "
            f"{FAIRNESS_GROUP_MAX_CHARS} are allowed"
        )
    return PrioritySettings(priority=priority, fairness_group=group)
