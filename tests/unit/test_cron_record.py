"""The cron record the layers hand each other: built from a whole row, frozen, typed; and the
Agent Protocol JSON the API makes of it."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from typing import Any

import pytest

from runyard.db.tables import cron_firings, crons
from runyard.domain.cron import CronFiring, CronRecord, UnfinishedFiring, cron_or_none
from runyard.domain.encryption_context import CONTEXT_KEY
from runyard.services.crons import CronPage, to_wire

NOW = datetime(2026, 1, 1, tzinfo=UTC)
LATER = datetime(2026, 2, 1, 8, 30, tzinfo=UTC)


def row(**changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {column.key: None for column in crons.columns}
    base.update(
        cron_id="c",
        assistant_id="a",
        schedule="*/5 * * * *",
        payload={"assistant_id": "a", "input": {"x": 1}},
        metadata={"m": 1},
        enabled=True,
        created_at=NOW,
        updated_at=NOW,
    )
    base.update(changes)
    return base


def test_the_record_has_exactly_the_columns_of_the_crons_table() -> None:
    fields = [field.name for field in dataclasses.fields(CronRecord)]
    assert fields == [column.key for column in crons.columns]


def test_the_firing_record_has_exactly_the_columns_of_the_cron_firings_table() -> None:
    fields = [field.name for field in dataclasses.fields(CronFiring)]
    assert fields == [column.key for column in cron_firings.columns]


def test_a_row_becomes_a_frozen_record_other_keys_ignored() -> None:
    record = CronRecord.from_row({**row(thread_id="t"), "scheduled_for": LATER})
    assert record.thread_id == "t" and record.payload == {"assistant_id": "a", "input": {"x": 1}}
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.enabled = False  # type: ignore[misc]


def test_a_row_missing_a_column_is_refused() -> None:
    partial = row()
    del partial["next_run_date"]
    with pytest.raises(KeyError):
        CronRecord.from_row(partial)


def test_none_passes_through() -> None:
    assert cron_or_none(None) is None
    assert cron_or_none(row()) == CronRecord.from_row(row())


def test_with_json_replaces_only_the_json_columns_given() -> None:
    record = CronRecord.from_row(row())
    opened = record.with_json({"metadata": {"plain": True}, "cron_id": "other"})
    assert opened.metadata == {"plain": True} and opened.cron_id == "c"
    assert opened.payload is record.payload
    assert record.json_columns() == {"payload": record.payload, "metadata": {"m": 1}}


def test_an_unfinished_firing_holds_its_cron_and_occurrence() -> None:
    firing = UnfinishedFiring.from_row({**row(), "scheduled_for": LATER})
    assert firing.scheduled_for == LATER
    assert firing.cron == CronRecord.from_row(row())


def test_the_wire_form_has_every_field_timestamps_as_iso_strings() -> None:
    record = CronRecord.from_row(
        row(
            thread_id="t",
            user_id="u",
            timezone="Europe/Paris",
            on_run_completed="keep",
            end_time=LATER,
            next_run_date=LATER,
            updated_at=LATER,
        )
    )
    assert to_wire(record) == {
        "cron_id": "c",
        "assistant_id": "a",
        "thread_id": "t",
        "on_run_completed": "keep",
        "end_time": "2026-02-01T08:30:00+00:00",
        "schedule": "*/5 * * * *",
        "timezone": "Europe/Paris",
        "created_at": "2026-01-01T00:00:00+00:00",
        "updated_at": "2026-02-01T08:30:00+00:00",
        "payload": {"assistant_id": "a", "input": {"x": 1}},
        "user_id": "u",
        "next_run_date": "2026-02-01T08:30:00+00:00",
        "metadata": {"m": 1},
        "enabled": True,
    }


def test_the_wire_form_keeps_nulls_and_defaults_empty_json_to_objects() -> None:
    wire = to_wire(CronRecord.from_row(row(payload=None, metadata=None, enabled=False)))
    assert wire["payload"] == {} and wire["metadata"] == {}
    assert wire["enabled"] is False
    for field in ("thread_id", "user_id", "timezone", "on_run_completed", "end_time"):
        assert wire[field] is None
    assert wire["next_run_date"] is None


def test_the_wire_payload_leaves_out_the_creators_encryption_context() -> None:
    payload = {"input": {"x": 1}, CONTEXT_KEY: {"tenant": "t1"}}
    record = CronRecord.from_row(row(payload=payload))
    assert to_wire(record)["payload"] == {"input": {"x": 1}}
    assert record.payload == payload  # the record itself is left as it is


def test_a_page_selects_fields_and_the_servers_clock() -> None:
    page = CronPage([CronRecord.from_row(row())], next_offset=None, now=LATER)
    assert page.to_wire(None) == [to_wire(CronRecord.from_row(row()))]
    assert page.to_wire(["cron_id", "now", "cron_id", "end_time"]) == [
        {"cron_id": "c", "now": "2026-02-01T08:30:00+00:00", "end_time": None}
    ]
