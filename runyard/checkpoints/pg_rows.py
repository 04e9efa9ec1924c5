"""PostgreSQL checkpoint rows in LangGraph's terms: JSON as psycopg sends it, and a row read
back as a `CheckpointTuple` (values, metadata, parent and pending writes)."""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Sequence
from typing import Any, cast

from langgraph.checkpoint.base import Checkpoint, CheckpointTuple, writes_sort_key

# Channel values stored in the checkpoint row itself; anything else is a blob.
INLINE_TYPES = (str, int, float, bool)


def to_json(value: Any) -> str:
    """A value as JSON text."""
    # What psycopg's Jsonb sends: the json module's text of the value.
    return json.dumps(value)


def next_version(current: str | int | None) -> str:
    """The library's version format: a zero-padded counter, then a random fraction."""
    if current is None:
        number = 0
    elif isinstance(current, int):
        number = current
    else:
        number = int(current.split(".")[0])
    return f"{number + 1:032}.{random.random():016}"


def fenced_write_params(rows: Sequence[tuple[Any, ...]], special: bool) -> tuple[Any, ...]:
    """A task's write rows (five head columns, then index, channel, type, blob) as the
    parameters of one fenced statement: the head, then a list per column."""
    # One row per index: a later special write replaces an earlier one, as it would
    # one statement later; an ordinary write is kept as first written.
    by_index: dict[int, tuple[Any, ...]] = {}
    for row in rows:
        if special or row[5] not in by_index:
            by_index[row[5]] = row
    kept = list(by_index.values())
    columns = tuple([*column] for column in zip(*(row[5:] for row in kept), strict=True))
    return (*rows[0][:5], *columns)


def older_format(row: Any) -> bool:
    """A checkpoint written before format v4, whose pending sends sit in its parent's writes."""
    return bool(row["checkpoint"]["v"] < 4 and row["parent_checkpoint_id"])


def checkpoint_tuple(
    row: Any, loads: Callable[[tuple[str, bytes]], Any], metadata_read: Callable[[Any], Any]
) -> CheckpointTuple:
    """A checkpoint row of `SELECT` (runyard/db/checkpoints.py) as LangGraph's tuple:
    values, metadata, parent and pending writes (in the order the library returns them);
    `loads` reads a typed value, `metadata_read` the metadata."""
    checkpoint = row["checkpoint"]
    values = dict(checkpoint.get("channel_values") or {})
    for channel, kind, blob in zip(
        row["channels"] or (), row["types"] or (), row["blobs"] or (), strict=True
    ):
        if kind != "empty":
            values[channel] = loads((kind, blob))
    writes = sorted(
        zip(
            row["task_paths"] or (),
            row["task_ids"] or (),
            row["idxs"] or (),
            row["write_channels"] or (),
            row["write_types"] or (),
            row["write_blobs"] or (),
            strict=True,
        ),
        key=lambda w: writes_sort_key(w[0], w[1], w[2]),
    )
    thread_id, checkpoint_ns = row["thread_id"], row["checkpoint_ns"]
    parent_id = row["parent_checkpoint_id"]
    return CheckpointTuple(
        {
            "configurable": {
                "thread_id": thread_id,
                "checkpoint_ns": checkpoint_ns,
                "checkpoint_id": row["checkpoint_id"],
            }
        },
        cast(Checkpoint, {**checkpoint, "channel_values": values}),
        metadata_read(row["metadata"]),
        (
            {
                "configurable": {
                    "thread_id": thread_id,
                    "checkpoint_ns": checkpoint_ns,
                    "checkpoint_id": parent_id,
                }
            }
            if parent_id
            else None
        ),
        [(task, channel, loads((kind, blob))) for _, task, _, channel, kind, blob in writes],
    )
