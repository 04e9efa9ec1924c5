"""The run record the layers hand each other: built from a whole row, frozen, typed."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from typing import Any

import pytest

from runyard.db.tables import runs
from runyard.domain.run import RunRecord, UnreadRun, deletes_thread
from runyard.domain.status import RunStatus

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def row(**changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {column.key: None for column in runs.columns}
    base.update(
        run_id="r",
        thread_id="t",
        assistant_id="a",
        status="pending",
        metadata={"m": 1},
        kwargs={"graph_id": "g"},
        multitask_strategy="reject",
        created_at=NOW,
        updated_at=NOW,
        attempt=0,
        handovers=0,
        temporary=False,
        priority=0,
        fairness_group="default",
    )
    base.update(changes)
    return base


def test_the_record_has_exactly_the_columns_of_the_runs_table() -> None:
    fields = [field.name for field in dataclasses.fields(RunRecord)]
    assert fields == [column.key for column in runs.columns]


def test_a_row_becomes_a_frozen_record_with_its_status_a_member() -> None:
    record = RunRecord.from_row({**row(status="running"), "thread_has_checkpoint": True})
    assert record.status is RunStatus.RUNNING
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.status = RunStatus.SUCCESS  # type: ignore[misc]


def test_a_row_missing_a_column_is_refused() -> None:
    partial = row()
    del partial["kwargs"]
    with pytest.raises(KeyError):
        RunRecord.from_row(partial)


def test_an_unknown_status_is_refused() -> None:
    with pytest.raises(ValueError):
        RunRecord.from_row(row(status="busy"))


def test_with_json_replaces_only_the_json_columns_given() -> None:
    record = RunRecord.from_row(row())
    opened = record.with_json({"metadata": {"plain": True}, "run_id": "other"})
    assert opened.metadata == {"plain": True} and opened.run_id == "r"
    assert opened.kwargs is record.kwargs
    assert set(record.json_columns()) == {"metadata", "kwargs", "output", "error"}


@pytest.mark.parametrize(
    ("temporary", "on_completion", "deletes"),
    [(False, None, False), (True, None, True), (True, "delete", True), (True, "keep", False)],
)
def test_a_stateless_run_deletes_its_thread_unless_kept(
    temporary: bool, on_completion: str | None, deletes: bool
) -> None:
    assert deletes_thread(temporary, on_completion) is deletes
    record = RunRecord.from_row(row(temporary=temporary, on_completion=on_completion))
    assert record.deletes_thread is deletes
    unread = UnreadRun.from_row(row(temporary=temporary, on_completion=on_completion))
    assert unread.deletes_thread is deletes
