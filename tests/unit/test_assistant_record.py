"""The assistant records the layers hand each other: built from whole rows, frozen, typed, and
turned into the Agent Protocol's JSON only at the API's edge."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime
from typing import Any

import pytest

from runyard.db.tables import assistant_versions, assistants
from runyard.domain.assistant import AssistantRecord, AssistantVersionRecord, assistant_or_none
from runyard.schemas.assistants import (
    Assistant,
    AssistantVersion,
    columns_to_wire,
    to_wire,
    version_to_wire,
)

CREATED = datetime(2026, 1, 1, 12, 30, tzinfo=UTC)
UPDATED = datetime(2026, 1, 2, 8, 0, 0, 123456, tzinfo=UTC)


def row(**changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "assistant_id": "a",
        "graph_id": "agent",
        "name": "Agent",
        "description": None,
        "config": {"configurable": {"model": "m"}},
        "context": {"model": "m"},
        "metadata": {"created_by": "system"},
        "version": 2,
        "created_at": CREATED,
        "updated_at": UPDATED,
    }
    base.update(changes)
    return base


def version_row(**changes: Any) -> dict[str, Any]:
    base = {k: v for k, v in row().items() if k != "updated_at"}
    base.update(changes)
    return base


def test_the_records_have_exactly_the_columns_of_their_tables() -> None:
    assert [f.name for f in dataclasses.fields(AssistantRecord)] == [
        column.key for column in assistants.columns
    ]
    assert [f.name for f in dataclasses.fields(AssistantVersionRecord)] == [
        column.key for column in assistant_versions.columns
    ]


def test_a_row_becomes_a_frozen_record() -> None:
    record = AssistantRecord.from_row({**row(), "extra": "ignored"})
    assert record.graph_id == "agent" and record.version == 2 and record.updated_at == UPDATED
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.name = "other"  # type: ignore[misc]
    assert assistant_or_none(None) is None
    assert assistant_or_none(row()) == record


def test_a_row_missing_a_column_is_refused() -> None:
    partial = row()
    del partial["context"]
    with pytest.raises(KeyError):
        AssistantRecord.from_row(partial)
    with pytest.raises(KeyError):
        AssistantVersionRecord.from_row({k: v for k, v in version_row().items() if k != "name"})


@pytest.mark.parametrize("record_type", [AssistantRecord, AssistantVersionRecord])
def test_with_json_replaces_only_the_json_columns_given(record_type: Any) -> None:
    record = record_type.from_row(row())
    assert record.json_columns() == {
        "config": {"configurable": {"model": "m"}},
        "context": {"model": "m"},
        "metadata": {"created_by": "system"},
    }
    opened = record.with_json({"metadata": {"plain": True}, "name": "other"})
    assert opened.metadata == {"plain": True} and opened.name == "Agent"
    assert opened.config is record.config
    assert type(opened) is record_type


def test_a_version_gives_the_columns_it_sets_when_made_current() -> None:
    version = AssistantVersionRecord.from_row(version_row(version=3, description="third"))
    assert version.current_columns() == {
        "graph_id": "agent",
        "name": "Agent",
        "description": "third",
        "config": {"configurable": {"model": "m"}},
        "context": {"model": "m"},
        "metadata": {"created_by": "system"},
        "version": 3,
    }
    # Every column of `assistants` but the id and the timestamps.
    fixed = {"assistant_id", "created_at", "updated_at"}
    assert set(version.current_columns()) == {c.key for c in assistants.columns} - fixed


def test_to_wire_writes_every_field_with_timestamps_in_iso_8601() -> None:
    wire = to_wire(AssistantRecord.from_row(row()))
    assert wire == {
        "assistant_id": "a",
        "graph_id": "agent",
        "name": "Agent",
        "description": None,
        "config": {"configurable": {"model": "m"}},
        "context": {"model": "m"},
        "metadata": {"created_by": "system"},
        "version": 2,
        "created_at": "2026-01-01T12:30:00+00:00",
        "updated_at": "2026-01-02T08:00:00.123456+00:00",
    }
    # The wire model the routes answer with reads it back to the same JSON.
    assert json.loads(Assistant.model_validate(wire).model_dump_json()) == wire
    # As the whole row read without a `select` was written before records.
    assert wire == columns_to_wire(row())


def test_version_to_wire_writes_every_field_of_a_version() -> None:
    wire = version_to_wire(AssistantVersionRecord.from_row(version_row(description="d")))
    assert wire == {**columns_to_wire(version_row()), "description": "d"}
    assert json.loads(AssistantVersion.model_validate(wire).model_dump_json()) == wire


def test_selected_columns_keep_only_themselves() -> None:
    assert columns_to_wire({"assistant_id": "a", "created_at": CREATED}) == {
        "assistant_id": "a",
        "created_at": "2026-01-01T12:30:00+00:00",
    }
