"""Databases moved to a chosen migration, their schema as reflected, and rows to fill them."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import JSON, Boolean, DateTime, Float, Integer, MetaData, String, select
from sqlalchemy.engine import Connection

from tests.support.databases import fresh_database

BACKENDS = ["postgres", "sqlite"]
# The migrations' own bookkeeping, which each migration changes: left out of shapes and rows.
BOOKKEEPING = ("alembic_version", "schema_compatibility")


@contextmanager
def empty_database(kind: str, tmp_path: Path) -> Iterator[str]:
    """The async URL of an empty database for the block: a new SQLite file, or a fresh
    PostgreSQL database dropped afterwards."""
    if kind == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp_path / 'migrations.sqlite'}"
        return
    with fresh_database("runyard_migrations") as url:
        yield "postgresql+asyncpg://" + url.split("://", 1)[1]


@dataclass(frozen=True)
class ColumnShape:
    """What older code relies on in a column."""

    type: str
    nullable: bool
    has_default: bool


@dataclass(frozen=True)
class TableShape:
    """A table's columns, indexes (name -> columns) and foreign keys, as reflected."""

    columns: dict[str, ColumnShape]
    indexes: dict[str, tuple[str, ...]]
    foreign_keys: frozenset[tuple[tuple[str, ...], str]]


def shape_of(conn: Connection) -> dict[str, TableShape]:
    """Every table of the database (bookkeeping aside) as older code sees it."""
    from sqlalchemy import inspect

    inspector = inspect(conn)
    shapes = {}
    for table in inspector.get_table_names():
        if table in BOOKKEEPING:
            continue
        columns = {
            column["name"]: ColumnShape(
                str(column["type"].compile(dialect=conn.dialect)),
                bool(column["nullable"]),
                column.get("default") is not None,
            )
            for column in inspector.get_columns(table)
        }
        indexes = {
            str(index["name"]): tuple(str(name) for name in index["column_names"])
            for index in inspector.get_indexes(table)
        }
        for unique in inspector.get_unique_constraints(table):
            indexes[str(unique["name"])] = tuple(unique["column_names"])
        foreign_keys = frozenset(
            (tuple(fk["constrained_columns"]), fk["referred_table"])
            for fk in inspector.get_foreign_keys(table)
        )
        shapes[table] = TableShape(columns, indexes, foreign_keys)
    return shapes


def reflected(conn: Connection) -> MetaData:
    """The database's tables (bookkeeping aside), parents before children."""
    meta = MetaData()
    meta.reflect(conn)
    for name in BOOKKEEPING:
        if name in meta.tables:
            meta.remove(meta.tables[name])
    return meta


def fill(conn: Connection, n: int) -> None:
    """Insert row number `n` into every table, each column given a value of its type (a
    foreign key the value of the parent's row `n`), nullable columns too."""
    meta = reflected(conn)
    for table in meta.sorted_tables:
        row: dict[str, Any] = {}
        for column in table.columns:
            parent = next(iter(column.foreign_keys), None)
            if parent is not None:
                row[column.name] = _value(parent.column.type, parent.column.name, n)
            else:
                row[column.name] = _value(column.type, column.name, n)
        conn.execute(table.insert().values(row))
    conn.commit()


def _value(kind: Any, name: str, n: int) -> Any:
    if isinstance(kind, Boolean):
        return n % 2 == 0
    if isinstance(kind, Integer):
        return n
    if isinstance(kind, Float):
        return n + 0.5
    if isinstance(kind, DateTime):
        return datetime(2026, 1, 1, tzinfo=UTC) + timedelta(days=n)
    if isinstance(kind, JSON):
        return {"n": n, "name": name, "list": [1, "two"]}
    if isinstance(kind, String):
        text = f"{n}-{name}"
        return text[: kind.length] if kind.length else text
    raise AssertionError(f"no test value for a {kind!r} column ({name}): add one to _value")


def contents(conn: Connection) -> dict[str, list[dict[str, Any]]]:
    """Every row of every table (bookkeeping aside), in a stable order."""
    meta = reflected(conn)
    rows = {}
    for table in meta.sorted_tables:
        found = [dict(row._mapping) for row in conn.execute(select(table))]
        rows[table.name] = sorted(found, key=repr)
    return rows


def projected(
    rows: dict[str, list[dict[str, Any]]], shapes: dict[str, TableShape]
) -> dict[str, list[dict[str, Any]]]:
    """`rows` of the tables and columns `shapes` has, in a stable order."""
    kept = {}
    for table, shape in shapes.items():
        if table in rows:
            found = [{k: v for k, v in row.items() if k in shape.columns} for row in rows[table]]
            kept[table] = sorted(found, key=repr)
    return kept
