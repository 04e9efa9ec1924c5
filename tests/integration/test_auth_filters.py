"""Auth filters: the metadata matcher and the SQL conditions agree, on SQLite and PostgreSQL.

The operators are LangGraph's (`$eq`, `$contains`, `$or`, `$and`, nesting included), with the
meaning langgraph-runtime-inmem gives them (`_check_filter_match`, read in its source): plain
values and `$eq` compare exactly, `$or`/`$and` are ANDed with the keys beside them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from sqlalchemy import JSON, Column, MetaData, String, Table, insert, select
from sqlalchemy.dialects import postgresql
from sqlalchemy.ext.asyncio import AsyncConnection

from runyard.auth.guards import metadata_matches
from runyard.db.dialect import json_filter
from runyard.db.engine import create_engine
from runyard.domain.auth_filters import AuthFilterError, check_filter
from tests.support.databases import create_database, drop_database, postgres_available

ODD = "o'k \\' \\\\ \" é ☃ '); DROP TABLE rows; --"
ROWS = {
    "a": {"owner": "user-a", "tags": ["x", "y"]},
    "b": {"owner": "user-b", "tags": ["y"]},
    "c": {"tags": "x"},
    "s": {"created_by": "system"},
    "f": {"flag": True, "level": {"n": 1, "m": 2}},
    # Quotes, backslashes and SQL in a value: PostgreSQL gets containment operands written
    # into the statement (runyard/db/dialect.py, jsonb_constant), quoted.
    "q": {"owner": ODD, "tags": [ODD]},
}
HAS_X = {"tags": {"$contains": "x"}}
OWN_OR_SYSTEM = {"$or": [{"owner": "user-a"}, {"created_by": "system"}]}
FILTERS: list[tuple[dict[str, Any], set[str]]] = [
    ({"owner": "user-a"}, {"a"}),
    ({"owner": {"$eq": "user-b"}}, {"b"}),
    ({"tags": {"$contains": "y"}}, {"a", "b"}),
    ({"tags": {"$contains": ["x", "y"]}}, {"a"}),
    ({"owner": "user-b", "tags": {"$contains": "x"}}, set()),
    ({"owner": "nobody"}, set()),
    # Exact equality, as LangGraph compares: no containment of lists or objects.
    ({"tags": {"$eq": ["y"]}}, {"b"}),
    ({"tags": ["y"]}, {"b"}),
    ({"level": {"n": 1}}, set()),
    ({"level": {"$eq": {"n": 1, "m": 2}}}, {"f"}),
    ({"flag": True}, {"f"}),
    ({"flag": 1}, set()),
    # LangGraph's documented pattern: own resources and the system's.
    (OWN_OR_SYSTEM, {"a", "s"}),
    ({"$and": [{"tags": {"$contains": "y"}}, {"owner": "user-b"}]}, {"b"}),
    ({"$or": [{"owner": "user-a"}, {"owner": "user-b"}], "tags": {"$contains": "x"}}, {"a"}),
    ({"$or": [{"owner": "user-b"}, {"$and": [{"owner": "user-a"}, {"tags": "x"}]}]}, {"b"}),
    ({"$or": [{"owner": "user-b"}, {"$and": [{"owner": "user-a"}, HAS_X]}]}, {"a", "b"}),
    ({"$and": [OWN_OR_SYSTEM, {"$or": [{"tags": {"$contains": "x"}}, {"flag": True}]}]}, {"a"}),
    ({"$or": [{"owner": "user-a"}]}, {"a"}),
    ({"owner": ODD}, {"q"}),
    ({"owner": {"$eq": ODD}, "tags": {"$contains": ODD}}, {"q"}),
    ({"tags": {"$contains": ODD + "x"}}, set()),
]
# Filters Runyard cannot read: each must fail, never match nothing or everything.
INVALID: list[tuple[Any, str]] = [
    ({"$in": {"owner": ["user-a"]}}, "$in"),
    ({"owner": {"$ne": "user-a"}}, "$ne"),
    ({"$or": [{"owner": "user-a"}, {"owner": {"$regex": "."}}]}, "$regex"),
    ({"$and": [OWN_OR_SYSTEM, {"$not": {"owner": "user-b"}}]}, "$not"),
    ({"owner": {"$eq": "user-a", "$contains": "x"}}, "$contains,$eq"),
    ({"$or": []}, "$or"),
    ({"$or": {"owner": "user-a"}}, "$or"),
    ({"$and": [{}, {"owner": "user-a"}]}, "$and"),
    ({"tags": {"$contains": []}}, "$contains"),
]


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def database_url(request: pytest.FixtureRequest) -> Iterator[str]:
    """An empty database of each backend."""
    if request.param == "sqlite":
        yield "sqlite+aiosqlite:///:memory:"
        return
    if not postgres_available():
        pytest.fail("PostgreSQL is not reachable at 127.0.0.1:5432; start it (docs/testing.md)")
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
    check_filter(spec)
    async with filled_table(database_url) as (session, table):
        statement = select(table.c.id).where(*json_filter(session, table.c.metadata, spec))
        found = set((await session.execute(statement)).scalars())
    assert found == expected


@pytest.mark.parametrize(("spec", "operator"), INVALID)
def test_an_unknown_or_malformed_operator_is_refused(spec: Any, operator: str) -> None:
    with pytest.raises(AuthFilterError) as raised:
        check_filter(spec)
    assert raised.value.operator == operator
    assert operator.split(",")[0] in raised.value.message


@pytest.mark.parametrize(("spec", "operator"), INVALID)
async def test_json_filter_refuses_what_it_cannot_read(
    database_url: str, spec: Any, operator: str
) -> None:
    async with filled_table(database_url) as (session, table):
        with pytest.raises(AuthFilterError):
            json_filter(session, table.c.metadata, spec)


@asynccontextmanager
async def filled_table(database_url: str) -> AsyncIterator[tuple[AsyncConnection, Table]]:
    """A table of ROWS (id, metadata) and a connection to query it."""
    json_type = JSON().with_variant(postgresql.JSONB(), "postgresql")
    table = Table("auth_items", MetaData(), Column("id", String), Column("metadata", json_type))
    engine = create_engine(database_url)
    try:
        async with engine.begin() as conn:
            await conn.run_sync(table.metadata.drop_all)
            await conn.run_sync(table.metadata.create_all)
            await conn.execute(insert(table), [{"id": k, "metadata": v} for k, v in ROWS.items()])
        async with engine.connect() as session:
            yield session, table
    finally:
        await engine.dispose()
