"""The bounds on what one user holds, each a setting whose name the refusal carries.

A request past one is the caller's to change (422), except a full queue of pending runs,
which frees itself as runs start (429): both are `InvalidInputError`s, so every surface
(REST, the thread session, MCP, A2A) answers them as the caller's error.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from runyard.domain.errors import InvalidInputError


class OverBoundError(InvalidInputError):
    """A request past a bound on what one user holds; `setting` is the bound's name."""

    def __init__(self, problem: str, setting: str, limit: int, advice: str) -> None:
        super().__init__(f"{problem}; {setting} allows at most {limit}: {advice}")
        self.setting = setting
        self.limit = limit


class QueueFullError(OverBoundError):
    """A fairness group already has as many pending runs as its bound allows."""

    status_code = 429


@dataclass(frozen=True, slots=True)
class RunBounds:
    """How many pending runs one fairness group may hold, and how many runs one batch."""

    pending_runs_per_group: int
    batch_runs: int


# PostgreSQL indexes a store item by its namespace (labels joined by periods) and key: an
# index entry holds at most 2,704 bytes. What a client sends may take 2,048 of them, in UTF-8,
# which leaves room for a label an auth handler puts in front (the user's identity).
STORE_ENTRY_BYTES = 2048


@dataclass(frozen=True, slots=True)
class StoreBounds:
    """How long a store item's key and namespace labels may be, and how many labels."""

    key_chars: int
    label_chars: int
    labels: int

    def check_item(self, namespace: Sequence[str], key: str) -> None:
        """OverBoundError naming the first part of a new item past its bound."""
        require_at_most(
            len(key),
            self.key_chars,
            f"the key is {len(key)} characters long",
            "RUNYARD_STORE_MAX_KEY_CHARS",
            "use a shorter key, such as a hash of the long one",
        )
        require_at_most(
            len(namespace),
            self.labels,
            f"the namespace has {len(namespace)} labels",
            "RUNYARD_STORE_MAX_NAMESPACE_LABELS",
            "use a shallower namespace",
        )
        for index, label in enumerate(namespace):
            require_at_most(
                len(label),
                self.label_chars,
                f"namespace label {index} is {len(label)} characters long",
                "RUNYARD_STORE_MAX_LABEL_CHARS",
                "use shorter labels",
            )
        size = _utf8_bytes(".".join(namespace)) + _utf8_bytes(key)
        require_at_most(
            size,
            STORE_ENTRY_BYTES,
            f"the namespace and key take {size} bytes of UTF-8 together",
            "STORE_ENTRY_BYTES (runyard/domain/user_bounds.py, within PostgreSQL's index entry)",
            "use shorter labels or a shorter key",
        )


def _utf8_bytes(text: str) -> int:
    # A lone surrogate is refused before (json_bounds); counted here, not raised.
    return len(text.encode("utf-8", "surrogatepass"))


def require_at_most(
    total: int,
    limit: int,
    problem: str,
    setting: str,
    advice: str,
    error: type[OverBoundError] = OverBoundError,
) -> None:
    """`error` (problem, setting, limit, advice) when `total`, what the request would make
    of the bounded quantity, is past `limit`."""
    if total > limit:
        raise error(problem, setting, limit, advice)


def check_batch_size(size: int, limit: int) -> None:
    """OverBoundError when one batch request holds more runs than RUNYARD_MAX_BATCH_RUNS."""
    require_at_most(
        size,
        limit,
        f"the batch holds {size} runs",
        "RUNYARD_MAX_BATCH_RUNS",
        "send the runs in several requests",
    )


def check_pending_room(group: str, pending: int, adding: int, limit: int) -> None:
    """QueueFullError when `adding` more runs would take the fairness group past
    RUNYARD_MAX_PENDING_RUNS_PER_GROUP (it has `pending`)."""
    require_at_most(
        pending + adding,
        limit,
        f"fairness group {group!r} has {pending} pending runs and this request adds {adding}",
        "RUNYARD_MAX_PENDING_RUNS_PER_GROUP",
        "wait for some to start, or cancel some, and retry",
        QueueFullError,
    )


def check_cron_room(existing: int, limit: int) -> None:
    """OverBoundError when the user has RUNYARD_MAX_CRONS_PER_USER crons already."""
    require_at_most(
        existing + 1,
        limit,
        f"this user has {existing} crons (enabled or not)",
        "RUNYARD_MAX_CRONS_PER_USER",
        "delete one first",
    )
