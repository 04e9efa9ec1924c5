"""A cron as stored: one frozen record, built once in `db/` from its row and read by attribute
everywhere above. JSON columns stay plain values; the API turns a record into the Agent
Protocol's JSON at its edge (`services/crons.py:to_wire`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar

from runyard.domain.stored import StoredRow, column_names


@dataclass(frozen=True, slots=True)
class CronRecord(StoredRow):
    """One row of `crons` (runyard/db/tables.py), column for column."""

    cron_id: str
    assistant_id: str
    # None for a stateless cron: each of its runs gets a new thread.
    thread_id: str | None
    user_id: str | None
    schedule: str
    timezone: str | None
    # The body of every run the cron creates (assistant_id, input, config, stream modes...).
    payload: Any
    metadata: Any
    on_run_completed: str | None
    enabled: bool
    end_time: datetime | None
    # None once the schedule has passed its end time.
    next_run_date: datetime | None
    created_at: datetime
    updated_at: datetime

    JSON_COLUMNS: ClassVar[tuple[str, ...]] = ("payload", "metadata")


@dataclass(frozen=True, slots=True)
class CronFiring(StoredRow):
    """One row of `cron_firings`: an occurrence an instance claimed, and what came of it."""

    cron_id: str
    scheduled_for: datetime
    claimed_by: str
    claimed_at: datetime
    # The run the occurrence created, or why it created none; neither yet: unfinished.
    run_id: str | None
    error: str | None


FIRING_COLUMNS = column_names(CronFiring)


@dataclass(frozen=True, slots=True)
class UnfinishedFiring:
    """A claimed occurrence that recorded neither a run nor an error, with its cron."""

    cron: CronRecord
    scheduled_for: datetime

    @classmethod
    def from_row(cls, row: Mapping[Any, Any]) -> UnfinishedFiring:
        """The record of a row holding every column of `crons` and the claim's
        `scheduled_for`."""
        return cls(CronRecord.from_row(row), row["scheduled_for"])


def cron_or_none(row: Mapping[Any, Any] | None) -> CronRecord | None:
    """`CronRecord.from_row`, passing None through."""
    return None if row is None else CronRecord.from_row(row)
