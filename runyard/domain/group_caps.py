"""Per-fairness-group caps on dispatch: how many of a group's runs may run at once, and how
many may start per minute; a default for every group and overrides per group.

A run whose group is at a cap is not claimed: it stays `pending`, says why (`held_back`),
and goes back to its group's place in the queue, which skips the group for a while.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

# Seconds a group at its running cap is skipped before one of its runs is tried again: short,
# since any of its running runs may end at any moment.
RUNNING_HOLD_SECONDS = 0.5
# At most this long between two claims tried in a group at its per-minute cap (the window
# may free later): the runs that arrived meanwhile are told why they wait at the next.
RATE_HOLD_MAX_SECONDS = 5.0
# A run popped from a capped group holds the group until its claim is decided, at most this
# long (a worker that dies meanwhile does not hold the group for longer).
PROBE_SECONDS = 5.0
# The window of the per-minute cap.
START_WINDOW_SECONDS = 60.0


@dataclass(frozen=True)
class GroupCap:
    """The caps of one group; 0 means no cap."""

    max_running: int = 0
    max_starts_per_minute: int = 0

    @property
    def capped(self) -> bool:
        """True when either cap applies."""
        return self.max_running > 0 or self.max_starts_per_minute > 0


@dataclass(frozen=True)
class GroupCaps:
    """The default caps and the overrides per group."""

    default: GroupCap = GroupCap()
    overrides: Mapping[str, GroupCap] = field(default_factory=dict)

    @property
    def any(self) -> bool:
        """True when some group may be capped (otherwise claims skip every cap check)."""
        return self.default.capped or any(cap.capped for cap in self.overrides.values())

    def of(self, group: str) -> GroupCap:
        """The caps that apply to `group`."""
        return self.overrides.get(group, self.default)


@dataclass(frozen=True)
class GroupLoad:
    """A group's runs running now and started in the last minute, read under its lock."""

    running: int
    started_last_minute: int
    # Seconds until the oldest start in the window leaves it (0 when none is in it).
    window_frees_in: float


@dataclass(frozen=True)
class HeldBack:
    """A claim refused by a cap: the run stays pending; its group is skipped `seconds`."""

    run_id: str
    group: str
    priority: int
    reason: str
    seconds: float


def held_back_reason(group: str, cap: GroupCap, load: GroupLoad) -> tuple[str, float] | None:
    """Why a run of `group` may not start now, and for how many seconds to skip the group;
    None when it may start. The reason stays the same while the cause does, so the runs
    marked with it are not written again."""
    if cap.max_running and load.running >= cap.max_running:
        reason = f"fairness group {group!r} is at its max_running ({cap.max_running})"
        return reason, RUNNING_HOLD_SECONDS
    if cap.max_starts_per_minute and load.started_last_minute >= cap.max_starts_per_minute:
        reason = (
            f"fairness group {group!r} is at its max_starts_per_minute "
            f"({cap.max_starts_per_minute})"
        )
        seconds = min(max(load.window_frees_in, RUNNING_HOLD_SECONDS), RATE_HOLD_MAX_SECONDS)
        return reason, seconds
    return None


def caps_from(
    max_running: int, max_starts_per_minute: int, overrides: Mapping[str, Mapping[str, int]]
) -> GroupCaps:
    """The caps of the settings: the default caps, and per group the keys it overrides."""
    default = GroupCap(max_running, max_starts_per_minute)
    return GroupCaps(
        default,
        {
            group: GroupCap(
                limits.get("max_running", max_running),
                limits.get("max_starts_per_minute", max_starts_per_minute),
            )
            for group, limits in overrides.items()
        },
    )


LIMIT_KEYS = ("max_running", "max_starts_per_minute")


def parse_group_limits(raw: str) -> dict[str, dict[str, int]]:
    """RUNYARD_GROUP_LIMITS, checked: a JSON object of group name to an object of
    `max_running` and/or `max_starts_per_minute` (integers >= 0, 0: no cap). ValueError
    names what is wrong."""
    try:
        parsed: Any = json.loads(raw)
    except ValueError as exc:
        raise ValueError(f"RUNYARD_GROUP_LIMITS is not valid JSON: {exc}") from None
    if not isinstance(parsed, dict):
        raise ValueError(
            'RUNYARD_GROUP_LIMITS must be a JSON object such as {"group": {"max_running": 3}}'
        )
    limits: dict[str, dict[str, int]] = {}
    for group, entry in parsed.items():
        where = f"RUNYARD_GROUP_LIMITS[{group!r}]"
        if not isinstance(entry, dict):
            raise ValueError(f"{where} must be an object with max_running, max_starts_per_minute")
        unknown = sorted(set(entry) - set(LIMIT_KEYS))
        if unknown:
            raise ValueError(
                f"{where} has unknown keys {unknown}; allowed: max_running, max_starts_per_minute"
            )
        for key, value in entry.items():
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{where}.{key} must be an integer >= 0 (0: no cap)")
        limits[group] = dict(entry)
    return limits
