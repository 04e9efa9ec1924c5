"""The few SQL constructs that differ between PostgreSQL and SQLite."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Float,
    String,
    Table,
    and_,
    bindparam,
    case,
    cast,
    exists,
    func,
    literal,
    or_,
    select,
    true,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncConnection

from runyard.domain.auth_filters import (
    contained_items,
    field_operator,
    filter_groups,
    unknown_operator,
)


def dialect_name(session: AsyncConnection) -> str:
    """`postgresql` or `sqlite` for the session's bind."""
    return session.dialect.name


def insert_ignoring_conflicts(session: AsyncConnection, table: Table) -> Any:
    """An INSERT that silently skips rows whose primary key already exists."""
    return insert_ignoring(dialect_name(session), table)


def insert_ignoring(dialect: str, table: Table) -> Any:
    """`insert_ignoring_conflicts` for a dialect by name."""
    if dialect == "postgresql":
        return postgresql.insert(table).on_conflict_do_nothing()
    return sqlite.insert(table).on_conflict_do_nothing()


def db_now(session: AsyncConnection) -> ColumnElement[Any]:
    """The database clock (never the worker's), with sub-second precision."""
    return clock(dialect_name(session))


def clock(dialect: str) -> ColumnElement[Any]:
    """`db_now` for a dialect by name (for statements built once and reused)."""
    if dialect == "postgresql":
        return func.clock_timestamp()
    return func.strftime("%Y-%m-%d %H:%M:%f", "now")


def clock_plus(dialect: str, name: str) -> ColumnElement[Any]:
    """The database clock moved forward by the bound parameter `name` (seconds, negative
    to go back); bind its value with `seconds_param`."""
    if dialect == "postgresql":
        seconds = bindparam(name, type_=Float())
        return func.clock_timestamp() + func.make_interval(0, 0, 0, 0, 0, 0, seconds)
    return func.strftime("%Y-%m-%d %H:%M:%f", "now", bindparam(name, type_=String()))


def seconds_param(dialect: str, seconds: float) -> float | str:
    """The value to bind to a `clock_plus` parameter."""
    if dialect == "postgresql":
        return float(seconds)
    return f"{float(seconds):+f} seconds"


def json_contains(session: AsyncConnection, column: Any, subset: dict[str, Any]) -> list[Any]:
    """Conditions true when the JSON object in `column` contains every key/value of `subset`.

    PostgreSQL uses JSONB containment (`@>`), so nested objects match partially. SQLite
    compares each top-level key; nested objects and lists there must match exactly.
    """
    if not subset:
        return []
    if dialect_name(session) == "postgresql":
        return [column.op("@>")(jsonb_constant(subset))]
    return [_sqlite_json_equals(column, str(key), value) for key, value in subset.items()]


def jsonb_constant(value: Any) -> Any:
    """A JSONB value written into the statement as a quoted constant, not bound.

    The operand of a containment that an index answers: the planner then sees the value on
    every execution and estimates how many rows match from the column's statistics. Bound,
    a prepared statement soon runs under a generic plan, which guesses 0.1% of the rows for
    any value; for a search sorted by created_at that plan walks the sort's index and
    filters row by row, reading most of the table for an owner with few threads.
    """
    text = bindparam(None, json.dumps(value), type_=String(), literal_execute=True)
    return cast(text, postgresql.JSONB)


def _sqlite_json_equals(column: Any, key: str, value: Any) -> Any:
    # json_extract answers SQL values (true is 1, an array is its JSON text): compare the
    # JSON type too, so true is not 1 and a string is never parsed as JSON.
    path = '$."' + key.replace('"', '\\"') + '"'
    kind = func.json_type(column, path)
    extracted = func.json_extract(column, path)
    if value is None:
        return kind == "null"
    if isinstance(value, bool):
        return kind == ("true" if value else "false")
    if isinstance(value, int | float):
        return and_(kind.in_(("integer", "real")), extracted == value)
    if isinstance(value, str):
        return and_(kind == "text", extracted == value)
    compact = json.dumps(value, separators=(",", ":"))
    wanted_kind = "object" if isinstance(value, dict) else "array"
    return case((kind == wanted_kind, func.json(extracted)), else_=None) == func.json(compact)


def json_filter(session: AsyncConnection, column: Any, spec: dict[str, Any]) -> list[Any]:
    """Conditions (ANDed) of an auth filter (`runyard.domain.auth_filters`).

    The same meaning as `runyard.auth.guards.metadata_matches` gives it in Python: plain values
    and `$eq` compare exactly, `$contains` looks into a list, `$or`/`$and` group filters.
    """
    conditions: list[Any] = []
    for key, wanted in spec.items():
        if key in ("$or", "$and"):
            groups = [
                and_(true(), *json_filter(session, column, group))
                for group in filter_groups(key, wanted)
            ]
            conditions.append(or_(*groups) if key == "$or" else and_(*groups))
        elif key.startswith("$"):
            raise unknown_operator(key)
        else:
            operator, operand = field_operator(wanted)
            if operator == "$eq":
                conditions.append(_json_field_equals(session, column, key, operand))
            else:
                conditions += [
                    _json_array_has(session, column, key, item) for item in contained_items(operand)
                ]
    return conditions


def _json_field_equals(session: AsyncConnection, column: Any, key: str, value: Any) -> Any:
    if dialect_name(session) == "postgresql":
        # Equality, not containment (`@>`): {"$eq": ["x"]} must not match ["x", "y"]. But an
        # equal field is also contained, and containment is what the metadata's GIN index
        # answers (ix_threads_metadata): it finds the few candidates, equality decides.
        field = column.op("->", return_type=postgresql.JSONB)(literal(key, String()))
        contained = column.op("@>")(jsonb_constant({key: value}))
        return and_(contained, field == cast(literal(json.dumps(value)), postgresql.JSONB))
    # SQLite's per-key comparison in json_contains is already exact.
    (condition,) = json_contains(session, column, {key: value})
    return condition


def _json_array_has(session: AsyncConnection, column: Any, key: str, item: Any) -> Any:
    if dialect_name(session) == "postgresql":
        return column.op("@>")(jsonb_constant({key: [item]}))
    path = '$."' + key.replace('"', '\\"') + '"'
    elements = func.json_each(column, path).table_valued("value").alias("elements")
    return exists(select(literal(1)).select_from(elements).where(elements.c.value == item))


def rowcount(result: Any) -> int:
    """Rows an UPDATE/DELETE touched (typed as Result, it is a CursorResult at run time)."""
    return int(getattr(result, "rowcount", 0) or 0)


async def database_now(session: AsyncConnection) -> datetime:
    """The database clock as an aware UTC datetime (SQLite answers a naive string)."""
    value = (await session.execute(select(db_now(session)))).scalar_one()
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC)
