"""Auth filters: the metadata matcher and the SQL conditions agree, on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import JSON, Column, MetaData, String, Table, insert, select
from sqlalchemy.dialects import postgresql

from runyard.auth.guards import metadata_matches
from runyard.db.dialect import json_filter
from runyard.db.engine import create_engine
from tests.support.databases import create_database, drop_database, postgres_available

ROWS = {
    "a": {"owner": "user-a", "tags": ["x", "y"]},
    "b": {"owner": "user-b", "tags": ["y"]},
    "c": {"tags": "x"},
}
FILTERS: list[tuple[dict[str, Any], set[str]]] = [
    ({"owner": "user-a"}, {"a"}),
    ({"owner": {"$eq": "user-b"}}, {"b"}),
    ({"tags": {"$contains": "y"}}, {"a", "b"}),
    ({"tags": {"$contains": ["x", "y"]}}, {"a"}),
    ({"owner": "user-b", "tags": {"$contains": "x"}}, set()),
    ({"owner": "nobody"}, set()),
]


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def database_url(request: pytest.FixtureRequest) -> Iterator[str]:
    """An empty database of each backend."""
    if request.param == "sqlite":
        yield "sqlite+aiosqlite:///:memory:"
        return
    if not postgres_available():
        pytest.fail("PostgreSQL is not reachable at 127.0.0.1:5432; start it (see README)")
    url = create_database()
    try:
        yield url
    finally:
        drop_database(url)


@pytest.mark.parametrize(("spec", "expected"), FILTERS)
def test_metadata_matches(spec: dict[str, Any], expected: set[str]) -> None:
    assert {key for key, metadata in ROWS.items() if metadata_matches(metadata, spec)} == expected


@pytest.mark.parametrize(("spec", "expected"), FILTERS)
async def test_json_filter_selects_the_same_rows(
    database_url: str, spec: dict[str, Any], expected: set[str]
) -> None:
    json_type = JSON().with_variant(postgresql.JSONB(), "postgresql")
    table = Table("auth_items", MetaData(), Column("id", String), Column("metadata", json_type))
    engine = create_engine(database_url)
    try:
        async with engine.begin() as conn:
            await conn.run_sync(table.metadata.drop_all)
            await conn.run_sync(table.metadata.create_all)
            await conn.execute(insert(table), [{"id": k, "metadata": v} for k, v in ROWS.items()])
        async with engine.connect() as session:
            statement = select(table.c.id).where(*json_filter(session, table.c.metadata, spec))
            found = set((await session.execute(statement)).scalars())
        assert found == expected
    finally:
        await engine.dispose()
