"""SQL for the vectors of the dev-mode store when sqlite-vec cannot be loaded: one JSON
vector per indexed field of an item, beside langgraph-checkpoint-sqlite's `store` table."""

from __future__ import annotations

import json
from collections.abc import Sequence

import aiosqlite

_CREATE = """
CREATE TABLE IF NOT EXISTS runyard_store_vectors (
    prefix TEXT NOT NULL,
    key TEXT NOT NULL,
    field TEXT NOT NULL,
    embedding TEXT NOT NULL,
    PRIMARY KEY (prefix, key, field)
)
"""
# The store drops expired items on its own; their vectors go at the next sweep.
_DELETE_ORPHANS = """
DELETE FROM runyard_store_vectors WHERE NOT EXISTS (
    SELECT 1 FROM store WHERE store.prefix = runyard_store_vectors.prefix
    AND store.key = runyard_store_vectors.key)
"""


async def create_vector_table(conn: aiosqlite.Connection) -> None:
    """Create the vectors table if it is missing."""
    await conn.execute(_CREATE)


async def replace_vectors(
    conn: aiosqlite.Connection,
    prefix: str,
    key: str,
    vectors: Sequence[tuple[str, Sequence[float]]],
) -> None:
    """Make `vectors` (field, embedding) the item's only ones (none: the item has none)."""
    await conn.execute(
        "DELETE FROM runyard_store_vectors WHERE prefix = ? AND key = ?", (prefix, key)
    )
    if vectors:
        await conn.executemany(
            "INSERT INTO runyard_store_vectors (prefix, key, field, embedding) VALUES (?, ?, ?, ?)",
            [(prefix, key, field, json.dumps(list(vector))) for field, vector in vectors],
        )


async def vectors_under(
    conn: aiosqlite.Connection, prefix: str
) -> dict[tuple[str, str], list[list[float]]]:
    """Every vector of the items whose namespace starts with `prefix`, by (prefix, key)."""
    like = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    rows = await conn.execute_fetchall(
        "SELECT prefix, key, embedding FROM runyard_store_vectors "
        "WHERE prefix = ? OR prefix LIKE ? ESCAPE '\\' OR ? = ''",
        (prefix, like + ".%", prefix),
    )
    found: dict[tuple[str, str], list[list[float]]] = {}
    for row_prefix, key, embedding in rows:
        found.setdefault((row_prefix, key), []).append(json.loads(embedding))
    return found


async def delete_orphan_vectors(conn: aiosqlite.Connection) -> int:
    """Delete the vectors of items that no longer exist; returns how many went."""
    cursor = await conn.execute(_DELETE_ORPHANS)
    return cursor.rowcount or 0
