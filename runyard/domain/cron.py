"""A cron as stored: one frozen record, built once in `db/` from its row and read by attribute
everywhere above. JSON columns stay plain values; the API turns a record into the Agent
Protocol's JSON at its edge (`services/crons.py:to_wire`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from datetime import datetime
from typing import Any


@dataclass(frozen=True, slots=True)
class CronRecord:
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

    @classmethod
    def from_row(cls, row: Mapping[Any, Any]) -> CronRecord:
        """The record of a row holding every column of `crons` (other keys are ignored)."""
        return cls(**{name: row[name] for name in _COLUMNS})

    def with_json(self, values: Mapping[str, Any]) -> CronRecord:
        """A copy with these JSON columns replaced (decrypted, say)."""
        return replace(self, **{name: values[name] for name in _JSON if name in values})

    def json_columns(self) -> dict[str, Any]:
        """The JSON columns, by name, as a custom encryptor reads them."""
        return {name: getattr(self, name) for name in _JSON}


_COLUMNS = tuple(f.name for f in fields(CronRecord))
_JSON = ("payload", "metadata")


@dataclass(frozen=True, slots=True)
class CronFiring:
    """One row of `cron_firings`: an occurrence an instance claimed, and what came of it."""

    cron_id: str
    scheduled_for: datetime
    claimed_by: str
    claimed_at: datetime
    # The run the occurrence created, or why it created none; neither yet: unfinished.
    run_id: str | None
    error: str | None

    @classmethod
    def from_row(cls, row: Mapping[Any, Any]) -> CronFiring:
        """The record of a row holding every column of `cron_firings`."""
        return cls(**{name: row[name] for name in FIRING_COLUMNS})


FIRING_COLUMNS = tuple(f.name for f in fields(CronFiring))


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
