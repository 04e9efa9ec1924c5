"""SQL of `runyard reencrypt`: every table holding encrypted data, read in key order and
updated row by row, each update conditional on the row still holding what was read.

Each statement is plain SQL for both backends: the JSON columns are read and written as
their text (`CAST(... AS text)` / `CAST(:v AS jsonb)` on PostgreSQL), the blobs as bytes,
so nothing goes through the engine's JSON codec.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection


@dataclass(frozen=True)
class Target:
    """A table whose `columns` may hold encrypted data, keyed by `keys`.

    `kind`: `json` (JSON documents with encrypted keys; `columns` are the JSON columns) or
    `blob` (a serialized value: `columns` are its type column and its bytes column).
    """

    database: str  # `runyard`, `checkpoints` or `store` (one file each on SQLite)
    table: str
    keys: tuple[str, ...]
    columns: tuple[str, ...]
    kind: str


_RUNYARD_TABLES = [
    Target("runyard", "assistants", ("assistant_id",), ("config", "context", "metadata"), "json"),
    Target(
        "runyard",
        "assistant_versions",
        ("assistant_id", "version"),
        ("config", "context", "metadata"),
        "json",
    ),
    Target(
        "runyard",
        "threads",
        ("thread_id",),
        ("metadata", "config", "values", "interrupts", "error", "context"),
        "json",
    ),
    Target("runyard", "runs", ("run_id",), ("metadata", "kwargs", "output", "error"), "json"),
    Target("runyard", "crons", ("cron_id",), ("payload", "metadata"), "json"),
    Target("runyard", "webhook_deliveries", ("delivery_id",), ("payload",), "json"),
    # At-most-once tool calls' results, serialized as checkpoint values are.
    Target("runyard", "tool_calls", ("thread_id", "call_key"), ("result_type", "result"), "blob"),
]
_CHECKPOINT = ("thread_id", "checkpoint_ns", "checkpoint_id")
POSTGRES_TARGETS = [
    *_RUNYARD_TABLES,
    Target("runyard", "checkpoints", _CHECKPOINT, ("metadata",), "json"),
    Target(
        "runyard",
        "checkpoint_blobs",
        ("thread_id", "checkpoint_ns", "channel", "version"),
        ("type", "blob"),
        "blob",
    ),
    Target(
        "runyard", "checkpoint_writes", (*_CHECKPOINT, "task_id", "idx"), ("type", "blob"), "blob"
    ),
    Target("runyard", "store", ("prefix", "key"), ("value",), "json"),
]
SQLITE_TARGETS = [
    *_RUNYARD_TABLES,
    Target("checkpoints", "checkpoints", _CHECKPOINT, ("type", "checkpoint"), "blob"),
    Target("checkpoints", "checkpoints", _CHECKPOINT, ("metadata",), "json"),
    Target("checkpoints", "writes", (*_CHECKPOINT, "task_id", "idx"), ("type", "value"), "blob"),
    Target("store", "store", ("prefix", "key"), ("value",), "json"),
]


def _quoted(name: str) -> str:
    return f'"{name}"'


async def table_exists(session: AsyncConnection, dialect: str, table: str) -> bool:
    """Whether `table` exists (the store's tables appear on its first use)."""
    if dialect == "postgresql":
        query = "SELECT to_regclass(:name) IS NOT NULL"
        return bool((await session.execute(text(query), {"name": table})).scalar())
    query = "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = :name"
    return bool((await session.execute(text(query), {"name": table})).scalar())


async def read_batch(
    session: AsyncConnection,
    dialect: str,
    target: Target,
    after: Sequence[Any] | None,
    size: int,
) -> list[dict[str, Any]]:
    """The next `size` rows after the key `after` (None: from the first), in key order."""
    keys = ", ".join(_quoted(k) for k in target.keys)
    if target.kind == "json" and dialect == "postgresql":
        columns = ", ".join(f"CAST({_quoted(c)} AS text) AS {_quoted(c)}" for c in target.columns)
    else:
        columns = ", ".join(_quoted(c) for c in target.columns)
    params: dict[str, Any] = {"size": size}
    where = ""
    if after is not None:
        marks = ", ".join(f":after{i}" for i in range(len(target.keys)))
        where = f"WHERE ({keys}) > ({marks})"
        params.update({f"after{i}": value for i, value in enumerate(after)})
    query = (
        f"SELECT {keys}, {columns} FROM {_quoted(target.table)} {where} ORDER BY {keys} LIMIT :size"
    )
    result = await session.execute(text(query), params)
    return [dict(row._mapping) for row in result]


async def replace_if_unchanged(
    session: AsyncConnection,
    dialect: str,
    target: Target,
    row: dict[str, Any],
    new: dict[str, Any],
) -> bool:
    """Write the columns of `new` into the row, only if every column still holds what was
    read (`row`); whether it was written."""
    params: dict[str, Any] = {}
    sets: list[str] = []
    conditions: list[str] = []
    for i, key in enumerate(target.keys):
        params[f"k{i}"] = row[key]
        conditions.append(f"{_quoted(key)} = :k{i}")
    for i, column in enumerate(target.columns):
        params[f"old{i}"] = row[column]
        json_pg = target.kind == "json" and dialect == "postgresql"
        old = f"CAST(:old{i} AS jsonb)" if json_pg else f":old{i}"
        if row[column] is None:
            conditions.append(f"{_quoted(column)} IS NULL")
        else:
            conditions.append(f"{_quoted(column)} = {old}")
        if column in new:
            params[f"new{i}"] = new[column]
            value = f"CAST(:new{i} AS jsonb)" if json_pg else f":new{i}"
            sets.append(f"{_quoted(column)} = {value}")
    if not sets:
        return True
    query = f"UPDATE {_quoted(target.table)} SET {', '.join(sets)} WHERE {' AND '.join(conditions)}"
    result = await session.execute(text(query), params)
    return int(getattr(result, "rowcount", 0) or 0) == 1
