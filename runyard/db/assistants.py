"""SQL statements for assistants and their versions."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
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
from runyard.domain.assistant import (
    VERSION_COLUMNS,
    AssistantRecord,
    AssistantVersionRecord,
    assistant_or_none,
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


async def insert_assistant(session: AsyncConnection, row: dict[str, Any]) -> AssistantRecord | None:
    """Insert an assistant row and return it; None (nothing written) when its id exists."""
    statement = (
        insert_ignoring_conflicts(session, assistants).values(**row).returning(*assistants.c)
    )
    return assistant_or_none((await session.execute(statement)).mappings().first())


async def insert_version(session: AsyncConnection, row: dict[str, Any]) -> None:
    """Record one version of an assistant."""
    await session.execute(assistant_versions.insert().values(**row))


# Read by every run's creation: built once.
_GET_ASSISTANT = select(assistants).where(assistants.c.assistant_id == bindparam("p_assistant_id"))


async def get_assistant(session: AsyncConnection, assistant_id: str) -> AssistantRecord | None:
    """The assistant, or None."""
    return assistant_or_none(
        await fetch_one(session, _GET_ASSISTANT, {"p_assistant_id": assistant_id})
    )


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
) -> AssistantRecord:
    """Overwrite columns of an existing assistant and return it as it now is."""
    statement = (
        update(assistants)
        .where(assistants.c.assistant_id == assistant_id)
        .values(**values)
        .returning(*assistants.c)
    )
    return AssistantRecord.from_row((await session.execute(statement)).mappings().one())


async def get_version(
    session: AsyncConnection, assistant_id: str, version: int
) -> AssistantVersionRecord | None:
    """One stored version, or None."""
    statement = _select_versions().where(
        assistant_versions.c.assistant_id == assistant_id,
        assistant_versions.c.version == version,
    )
    row = (await session.execute(statement)).mappings().first()
    return AssistantVersionRecord.from_row(row) if row is not None else None


async def list_versions(
    session: AsyncConnection,
    assistant_id: str,
    *,
    metadata: dict[str, Any] | None,
    auth_filter: dict[str, Any] | None = None,
    limit: int,
    offset: int,
) -> list[AssistantVersionRecord]:
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
    rows = (await session.execute(statement)).mappings()
    return [AssistantVersionRecord.from_row(row) for row in rows]


async def delete_assistant(session: AsyncConnection, assistant_id: str) -> bool:
    """Delete an assistant with all its versions; False when it did not exist."""
    await session.execute(
        delete(assistant_versions).where(assistant_versions.c.assistant_id == assistant_id)
    )
    result: Any = await session.execute(
        delete(assistants).where(assistants.c.assistant_id == assistant_id)
    )
    return bool(result.rowcount)


@dataclass(frozen=True, slots=True)
class AssistantPage:
    """One page of an assistant search: its filters, its order and its bounds."""

    graph_id: str | None
    name: str | None
    metadata: dict[str, Any] | None
    auth_filter: dict[str, Any] | None
    limit: int
    offset: int
    sort_by: str
    descending: bool


async def search_assistants(session: AsyncConnection, page: AssistantPage) -> list[AssistantRecord]:
    """One page of matching assistants, whole, in a stable order."""
    statement = _paged(session, select(assistants), page)
    return [AssistantRecord.from_row(row) for row in (await session.execute(statement)).mappings()]


async def select_assistant_columns(
    session: AsyncConnection, page: AssistantPage, columns: Sequence[str]
) -> list[dict[str, Any]]:
    """The same page as `search_assistants` with only `columns` of each assistant, by name:
    a search's `select`, read as the client chose it (nothing else is read or decrypted)."""
    statement = _paged(session, select(*(assistants.c[column] for column in columns)), page)
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


def _paged(session: AsyncConnection, statement: Select[Any], page: AssistantPage) -> Select[Any]:
    sort_column: ColumnElement[Any] = assistants.c[page.sort_by]
    if page.sort_by in _CASELESS_SORT:
        sort_column = func.lower(sort_column)
    # The id breaks ties so that pages never overlap or skip rows.
    order = [sort_column, assistants.c.assistant_id]
    conditions = _filters(session, page.graph_id, page.name, page.metadata, page.auth_filter)
    return (
        statement.where(*conditions)
        .order_by(*(column.desc() if page.descending else column.asc() for column in order))
        .limit(page.limit)
        .offset(page.offset)
    )


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
