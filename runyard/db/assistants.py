"""SQL statements for assistants and their versions."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, Select, bindparam, delete, func, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from runyard.db.dialect import (
    insert_ignoring_conflicts,
    json_contains,
    json_filter,
)
from runyard.db.driver import fetch_one
from runyard.db.tables import assistant_versions, assistants

ASSISTANT_COLUMNS = tuple(assistants.c.keys())
VERSION_COLUMNS = (
    "assistant_id",
    "version",
    "graph_id",
    "config",
    "context",
    "metadata",
    "created_at",
    "name",
    "description",
)
# Text columns sort without regard to case, as LangGraph Platform sorts them.
_CASELESS_SORT = frozenset({"name", "graph_id"})


async def insert_assistant_if_missing(session: AsyncConnection, row: dict[str, Any]) -> None:
    """Insert an assistant and its first version unless its id already exists."""
    await session.execute(insert_ignoring_conflicts(session, assistants).values(**row))
    version_row = {k: v for k, v in row.items() if k not in ("version", "updated_at")}
    await session.execute(
        insert_ignoring_conflicts(session, assistant_versions).values(version=1, **version_row)
    )


async def rename_assistant(
    session: AsyncConnection, assistant_id: str, old_name: str, new_name: str
) -> None:
    """Rename an assistant and its versions that still bear `old_name` (others keep theirs)."""
    if old_name == new_name:
        return
    for table in (assistants, assistant_versions):
        await session.execute(
            update(table)
            .where(table.c.assistant_id == assistant_id, table.c.name == old_name)
            .values(name=new_name)
        )


async def insert_assistant(session: AsyncConnection, row: dict[str, Any]) -> dict[str, Any] | None:
    """Insert an assistant row and return it; None (nothing written) when its id exists."""
    statement = (
        insert_ignoring_conflicts(session, assistants).values(**row).returning(*assistants.c)
    )
    inserted = (await session.execute(statement)).mappings().first()
    return dict(inserted) if inserted is not None else None


async def insert_version(session: AsyncConnection, row: dict[str, Any]) -> None:
    """Record one version of an assistant."""
    await session.execute(assistant_versions.insert().values(**row))


# Read by every run's creation: built once.
_GET_ASSISTANT = select(assistants).where(assistants.c.assistant_id == bindparam("p_assistant_id"))


async def get_assistant(session: AsyncConnection, assistant_id: str) -> dict[str, Any] | None:
    """The assistant row, or None."""
    return await fetch_one(session, _GET_ASSISTANT, {"p_assistant_id": assistant_id})


async def touch_assistant(session: AsyncConnection, assistant_id: str, now: datetime) -> bool:
    """Set updated_at, locking the row until commit; False when the assistant does not exist.

    Writing first makes concurrent changes of one assistant queue up on both backends
    (a row lock on PostgreSQL, the write lock on SQLite) before they read its versions.
    """
    statement = (
        update(assistants).where(assistants.c.assistant_id == assistant_id).values(updated_at=now)
    )
    result: Any = await session.execute(statement)
    return bool(result.rowcount)


async def next_version(session: AsyncConnection, assistant_id: str) -> int:
    """One more than the highest version ever recorded for the assistant."""
    statement = select(func.coalesce(func.max(assistant_versions.c.version), 0)).where(
        assistant_versions.c.assistant_id == assistant_id
    )
    return int((await session.execute(statement)).scalar_one()) + 1


async def update_assistant(
    session: AsyncConnection, assistant_id: str, values: dict[str, Any]
) -> dict[str, Any]:
    """Overwrite columns of an existing assistant and return the new row."""
    statement = (
        update(assistants)
        .where(assistants.c.assistant_id == assistant_id)
        .values(**values)
        .returning(*assistants.c)
    )
    return dict((await session.execute(statement)).mappings().one())


async def get_version(
    session: AsyncConnection, assistant_id: str, version: int
) -> dict[str, Any] | None:
    """One stored version, or None."""
    statement = _select_versions().where(
        assistant_versions.c.assistant_id == assistant_id,
        assistant_versions.c.version == version,
    )
    row = (await session.execute(statement)).mappings().first()
    return dict(row) if row is not None else None


async def list_versions(
    session: AsyncConnection,
    assistant_id: str,
    *,
    metadata: dict[str, Any] | None,
    auth_filter: dict[str, Any] | None = None,
    limit: int,
    offset: int,
) -> list[dict[str, Any]]:
    """Versions of an assistant, newest first, whose metadata contains `metadata`."""
    statement = (
        _select_versions()
        .where(
            assistant_versions.c.assistant_id == assistant_id,
            *json_contains(session, assistant_versions.c.metadata, metadata or {}),
        )
        .order_by(assistant_versions.c.version.desc())
        .limit(limit)
        .offset(offset)
    )
    return [dict(row) for row in (await session.execute(statement)).mappings()]


async def delete_assistant(session: AsyncConnection, assistant_id: str) -> bool:
    """Delete an assistant with all its versions; False when it did not exist."""
    await session.execute(
        delete(assistant_versions).where(assistant_versions.c.assistant_id == assistant_id)
    )
    result: Any = await session.execute(
        delete(assistants).where(assistants.c.assistant_id == assistant_id)
    )
    return bool(result.rowcount)


async def search_assistants(
    session: AsyncConnection,
    *,
    graph_id: str | None,
    name: str | None,
    metadata: dict[str, Any] | None,
    auth_filter: dict[str, Any] | None = None,
    limit: int,
    offset: int,
    sort_by: str,
    descending: bool,
    columns: Sequence[str] = ASSISTANT_COLUMNS,
) -> list[dict[str, Any]]:
    """One page of matching assistants with only `columns`, in a stable order."""
    sort_column: ColumnElement[Any] = assistants.c[sort_by]
    if sort_by in _CASELESS_SORT:
        sort_column = func.lower(sort_column)
    # The id breaks ties so that pages never overlap or skip rows.
    order = [sort_column, assistants.c.assistant_id]
    statement = (
        select(*(assistants.c[name] for name in columns))
        .where(*_filters(session, graph_id, name, metadata, auth_filter))
        .order_by(*(column.desc() if descending else column.asc() for column in order))
        .limit(limit)
        .offset(offset)
    )
    return [dict(row) for row in (await session.execute(statement)).mappings()]


async def count_assistants(
    session: AsyncConnection,
    *,
    graph_id: str | None,
    name: str | None,
    metadata: dict[str, Any] | None,
    auth_filter: dict[str, Any] | None = None,
) -> int:
    """How many assistants match the filters."""
    statement = (
        select(func.count())
        .select_from(assistants)
        .where(*_filters(session, graph_id, name, metadata, auth_filter))
    )
    return int((await session.execute(statement)).scalar_one())


def _select_versions() -> Select[Any]:
    return select(*(assistant_versions.c[name] for name in VERSION_COLUMNS))


def _filters(
    session: AsyncConnection,
    graph_id: str | None,
    name: str | None,
    metadata: dict[str, Any] | None,
    auth_filter: dict[str, Any] | None,
) -> list[Any]:
    conditions: list[Any] = json_contains(session, assistants.c.metadata, metadata or {})
    conditions += json_filter(session, assistants.c.metadata, auth_filter or {})
    if graph_id:
        conditions.append(assistants.c.graph_id == graph_id)
    if name:
        conditions.append(func.lower(assistants.c.name).contains(name.lower(), autoescape=True))
    return conditions
