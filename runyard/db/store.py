"""Statements on LangGraph's PostgreSQL store table that Runyard sends itself, on asyncpg.

The table belongs to langgraph-checkpoint-postgres (`AsyncPostgresStore.setup` creates it);
Runyard only sweeps its expired items, which needs neither psycopg nor the store's pool, and
asks whether the server has pgvector.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from runyard.db.driver import StatementPool

# Whether the PostgreSQL server can give the store semantic search (run with psycopg).
PGVECTOR_AVAILABLE = "SELECT 1 FROM pg_available_extensions WHERE name = 'vector'"

# The table and its TTL column exist once the store's setup has run on this database
# (the column came with a later migration of the library's than the table).
_SWEEPABLE = """
    SELECT EXISTS (
        SELECT 1 FROM pg_attribute
        WHERE attrelid = to_regclass('store') AND attname = 'expires_at' AND NOT attisdropped
    ) AS sweepable
"""
# The library's sweep: items whose expiry has passed by the database clock.
_DELETE_EXPIRED = """
    WITH expired AS (
        DELETE FROM store WHERE expires_at IS NOT NULL AND expires_at < now() RETURNING 1
    )
    SELECT count(*) AS deleted FROM expired
"""


async def store_sweepable(statements: StatementPool) -> bool:
    """True when the store's table (with its expiry column) exists on this database."""
    statements.count_statement()
    rows = await statements.fetch_sql(_SWEEPABLE, ())
    return bool(rows[0]["sweepable"])


async def delete_expired_store_items(statements: StatementPool) -> int:
    """Delete the store items whose TTL has run out; how many were deleted."""
    statements.count_statement()
    rows = await statements.fetch_sql(_DELETE_EXPIRED, ())
    return int(rows[0]["deleted"])
