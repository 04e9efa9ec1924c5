"""SQL statements for assistants and their versions."""

from __future__ import annotations

from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from app.db.dialect import insert_ignoring_conflicts
from app.db.tables import assistant_versions, assistants


async def insert_assistant_if_missing(session: AsyncSession, row: dict[str, Any]) -> None:
    """Insert an assistant and its first version unless its id already exists."""
    await session.execute(insert_ignoring_conflicts(session, assistants).values(**row))
    version_row = {k: v for k, v in row.items() if k not in ("version", "updated_at")}
    await session.execute(
        insert_ignoring_conflicts(session, assistant_versions).values(version=1, **version_row)
    )
