"""A thread as stored: one frozen record, built once in `db/` from its row and read by
attribute everywhere above. JSON columns stay plain values; the API turns a record into
the Agent Protocol's JSON at its edge (`services/threads.py:to_wire`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar

from runyard.domain.priority import DEFAULT_FAIRNESS_GROUP, PrioritySettings
from runyard.domain.status import ThreadStatus
from runyard.domain.stored import StoredRow, column_names


@dataclass(frozen=True, slots=True)
class ThreadRecord(StoredRow):
    """One row of `threads` (runyard/db/tables.py), column for column."""

    thread_id: str
    # JSON objects as stored (sealed where custom encryption covers them); the columns are
    # NOT NULL, but a JSON null written into them reads back as None.
    metadata: dict[str, Any] | None
    config: dict[str, Any] | None
    status: ThreadStatus
    # The graph's state: an object, or whatever else the graph keeps (a list, say).
    values: Any
    # Pending interrupts by task id.
    interrupts: dict[str, Any] | None
    error: Any
    # The context of the thread's latest run (assistant context merged with the run's).
    context: Any
    created_at: datetime
    updated_at: datetime
    # None on threads migrated from before the column existed (`updated_at` stands in).
    state_updated_at: datetime | None
    ttl_strategy: str | None
    ttl_minutes: float | None
    expires_at: datetime | None
    # Set at the thread's first run (`@priority.assign`); None until then.
    priority: int | None
    fairness_group: str | None

    TYPED_COLUMNS: ClassVar[Mapping[str, Callable[[Any], Any]]] = {"status": ThreadStatus}
    JSON_COLUMNS: ClassVar[tuple[str, ...]] = (
        "metadata",
        "config",
        "values",
        "interrupts",
        "error",
        "context",
    )

    @property
    def settings(self) -> PrioritySettings | None:
        """The thread's stored priority settings, or None when it has none yet."""
        if self.priority is None:
            return None
        # Both are set together (`set_priority_settings`); the default stands in for a group
        # only a hand-edited row could lack.
        group = self.fairness_group if self.fairness_group is not None else DEFAULT_FAIRNESS_GROUP
        return PrioritySettings(self.priority, group)


@dataclass(frozen=True, slots=True)
class LockedThread:
    """The thread a new run is about to join, locked, and whether a stateless run deletes
    it once that run ends (joining it would lose the new run with it)."""

    thread: ThreadRecord
    deleted_with_run: bool

    @classmethod
    def from_row(cls, row: Mapping[Any, Any]) -> LockedThread:
        """From a row of every column of `threads` and `deleted_with_run`."""
        return cls(ThreadRecord.from_row(row), bool(row["deleted_with_run"]))


@dataclass(frozen=True, slots=True)
class ExpiredThread(StoredRow):
    """A thread a TTL sweep claimed: what its expiry does with it."""

    thread_id: str
    ttl_strategy: str | None
    ttl_minutes: float | None


EXPIRED_COLUMNS = column_names(ExpiredThread)


def thread_or_none(row: Mapping[Any, Any] | None) -> ThreadRecord | None:
    """`ThreadRecord.from_row`, passing None through."""
    return None if row is None else ThreadRecord.from_row(row)
