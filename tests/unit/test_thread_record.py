"""The thread record the layers hand each other: built from a whole row, frozen, typed, and
turned into the Agent Protocol's JSON only at the API's edge."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from runyard.db.tables import threads
from runyard.domain.new_run import TargetThread
from runyard.domain.priority import PrioritySettings
from runyard.domain.status import ThreadStatus
from runyard.domain.thread import ExpiredThread, LockedThread, ThreadRecord, thread_or_none
from runyard.services.threads import to_wire, ttl_wire

CREATED = datetime(2026, 1, 1, tzinfo=UTC)
UPDATED = CREATED + timedelta(minutes=5)
STATE_UPDATED = CREATED + timedelta(minutes=3)
EXPIRES = CREATED + timedelta(hours=1)


def row(**changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {column.key: None for column in threads.columns}
    base.update(
        thread_id="t",
        metadata={"graph_id": "agent"},
        config={"configurable": {"k": 1}},
        status="idle",
        interrupts={},
        created_at=CREATED,
        updated_at=UPDATED,
    )
    base.update(changes)
    return base


def test_the_record_has_exactly_the_columns_of_the_threads_table() -> None:
    fields = [field.name for field in dataclasses.fields(ThreadRecord)]
    assert fields == [column.key for column in threads.columns]


def test_a_row_becomes_a_frozen_record_with_its_status_a_member() -> None:
    record = ThreadRecord.from_row({**row(status="interrupted"), "deleted_with_run": True})
    assert record.status is ThreadStatus.INTERRUPTED
    assert record.metadata == {"graph_id": "agent"}
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.status = ThreadStatus.IDLE  # type: ignore[misc]


def test_a_row_missing_a_column_is_refused() -> None:
    partial = row()
    del partial["context"]
    with pytest.raises(KeyError):
        ThreadRecord.from_row(partial)


def test_an_unknown_status_is_refused() -> None:
    with pytest.raises(ValueError):
        ThreadRecord.from_row(row(status="pending"))


def test_none_passes_through() -> None:
    assert thread_or_none(None) is None
    assert thread_or_none(row()) == ThreadRecord.from_row(row())


def test_with_json_replaces_only_the_json_columns_given() -> None:
    record = ThreadRecord.from_row(row(values={"sealed": "x"}))
    opened = record.with_json({"values": {"plain": True}, "thread_id": "other"})
    assert opened.values == {"plain": True} and opened.thread_id == "t"
    assert opened.metadata is record.metadata
    assert set(record.json_columns()) == {
        "metadata",
        "config",
        "values",
        "interrupts",
        "error",
        "context",
    }


def test_settings_are_none_until_the_thread_has_some() -> None:
    assert ThreadRecord.from_row(row()).settings is None
    stored = ThreadRecord.from_row(row(priority=-2, fairness_group="tenant-a"))
    assert stored.settings == PrioritySettings(-2, "tenant-a")
    assert TargetThread.of(stored) == TargetThread("t", {"graph_id": "agent"}, stored.settings)


def test_partial_reads_have_records_of_their_own() -> None:
    locked = LockedThread.from_row({**row(), "deleted_with_run": False})
    assert locked.thread == ThreadRecord.from_row(row()) and locked.deleted_with_run is False
    expired = ExpiredThread.from_row({"thread_id": "t", "ttl_strategy": None, "ttl_minutes": 2.0})
    assert expired == ExpiredThread("t", None, 2.0)


def test_the_wire_form_is_the_agent_protocols_thread() -> None:
    record = ThreadRecord.from_row(
        row(
            status="error",
            values={"messages": []},
            error={"error": "ValueError", "message": "boom"},
            context={"model": "m"},
            state_updated_at=STATE_UPDATED,
        )
    )
    assert to_wire(record) == {
        "thread_id": "t",
        "created_at": "2026-01-01T00:00:00+00:00",
        "updated_at": "2026-01-01T00:05:00+00:00",
        "state_updated_at": "2026-01-01T00:03:00+00:00",
        "metadata": {"graph_id": "agent"},
        "status": "error",
        "config": {"configurable": {"k": 1}},
        "values": {"messages": []},
        "interrupts": {},
        "error": {"error": "ValueError", "message": "boom"},
    }
    assert type(to_wire(record)["status"]) is str


def test_the_wire_form_fills_the_defaults_of_missing_values() -> None:
    # JSON null in the object columns reads back as None; the wire always has objects.
    record = ThreadRecord.from_row(row(metadata=None, config=None, interrupts=None))
    wire = to_wire(record)
    assert wire["metadata"] == {} and wire["config"] == {} and wire["interrupts"] == {}
    assert wire["values"] is None and wire["error"] is None
    # A thread migrated from before state_updated_at existed shows its updated_at.
    assert wire["state_updated_at"] == wire["updated_at"] == "2026-01-01T00:05:00+00:00"
    assert "context" not in wire and "ttl" not in wire


def test_the_ttl_is_on_the_wire_only_when_asked_and_set() -> None:
    without = ThreadRecord.from_row(row())
    assert ttl_wire(without) is None
    assert "ttl" not in to_wire(without, include_ttl=True)
    with_ttl = ThreadRecord.from_row(row(ttl_minutes=60.0, expires_at=EXPIRES))
    assert "ttl" not in to_wire(with_ttl)
    assert to_wire(with_ttl, include_ttl=True)["ttl"] == {
        "strategy": "delete",
        "ttl_minutes": 60.0,
        "expires_at": "2026-01-01T01:00:00+00:00",
    }
    kept = ThreadRecord.from_row(row(ttl_strategy="keep_latest", ttl_minutes=5.0))
    assert ttl_wire(kept) == {"strategy": "keep_latest", "ttl_minutes": 5.0, "expires_at": None}
