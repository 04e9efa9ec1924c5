"""The run path's statements sent straight to asyncpg, under SQLAlchemy's own connection.

Every run executes a few statements that are built once (`functools.cache`): read its
assistant, insert it, claim it, read it, finish it, look for the thread's next run.
Through `AsyncConnection.execute`, each costs about 65 µs of CPU in SQLAlchemy (a greenlet
switch, the statement's cache key, an execution context, a result object) on top of
asyncpg's own work. Here such a statement is compiled once for the session's dialect and
executed on the asyncpg connection the session has checked out: the SQL text, the bound
parameters (with each type's bind processor) and the rows (with each type's result
processor) are the ones SQLAlchemy would use.

Only sessions outside any transaction take this path (PostgreSQL autocommit sessions,
where every statement stands alone); any other session executes the statement through
SQLAlchemy as usual, so SQLite and transactions are untouched.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from functools import cache
from typing import Any

from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import Dialect
from sqlalchemy.ext.asyncio import AsyncConnection

# An execution option of the engine: called once per statement sent by this module (the
# SQLAlchemy statement counter sees only statements SQLAlchemy executes itself).
STATEMENT_CALLBACK = "runyard_on_statement"

Row = dict[str, Any]
Processor = Callable[[Any], Any] | None


class _Compiled:
    """One statement compiled for one dialect: its SQL and how to bind and read it."""

    def __init__(self, statement: Any, dialect: Dialect, keys: tuple[str, ...]) -> None:
        # As SQLAlchemy does: an INSERT or UPDATE without .values() sets the columns given.
        compiled = statement.compile(dialect=dialect, column_keys=list(keys))
        self.compiled = compiled
        self.sql = str(compiled)
        # Expanding parameters (IN lists) are rendered per execution by SQLAlchemy alone.
        self.direct = "__[POSTCOMPILE_" not in self.sql
        self.order: Sequence[str] = compiled.positiontup or ()
        self.binders: list[Processor] = [
            compiled.binds[name].type.dialect_impl(dialect).bind_processor(dialect)
            for name in self.order
        ]
        self.readers: dict[str, Processor] = {}
        for column in getattr(statement, "exported_columns", ()):
            reader = column.type.dialect_impl(dialect).result_processor(dialect, None)
            if reader is not None:
                self.readers[column.key] = reader

    def arguments(self, params: dict[str, Any]) -> list[Any]:
        values = self.compiled.construct_params(params)
        out = []
        for name, binder in zip(self.order, self.binders, strict=True):
            value = values[name]
            out.append(binder(value) if binder is not None else value)
        return out

    def row(self, record: Any) -> Row:
        readers = self.readers
        out: Row = {}
        for key, value in record.items():
            reader = readers.get(key)
            out[key] = reader(value) if reader is not None and value is not None else value
        return out


@cache
def _compile(statement: Any, dialect: Dialect, keys: tuple[str, ...]) -> _Compiled:
    return _Compiled(statement, dialect, keys)


def _standalone_options(session: AsyncConnection) -> Mapping[str, Any] | None:
    """The execution options of a PostgreSQL session whose statements each commit on their
    own; None for any other session."""
    sync = session.sync_connection
    if session.dialect.driver != "asyncpg" or sync is None:
        return None
    options = sync.get_execution_options()
    return options if options.get("isolation_level") == "AUTOCOMMIT" else None


async def fetch_all(session: AsyncConnection, statement: Any, params: dict[str, Any]) -> list[Row]:
    """Execute a statement built once; its rows as dicts (none for a statement without).

    Compiled forms are kept for the life of the process, one per statement object and set
    of parameter names: never pass a statement built anew for each call.
    """
    options = _standalone_options(session)
    compiled = _compile(statement, session.dialect, tuple(params)) if options is not None else None
    if options is None or compiled is None or not compiled.direct:
        result = await session.execute(statement, params)
        return [dict(row) for row in result.mappings()] if result.returns_rows else []
    counter = options.get(STATEMENT_CALLBACK)
    if counter is not None:
        counter()
    driver = await _driver_connection(session)
    try:
        records = await driver.fetch(compiled.sql, *compiled.arguments(params))
    except Exception as error:
        raise await _translated(session, driver, compiled.sql, error) from error
    return [compiled.row(record) for record in records]


async def _driver_connection(session: AsyncConnection) -> Any:
    """The asyncpg connection under a session that has one checked out.

    Read from the checked-out connection without the greenlet `get_raw_connection` spawns;
    that one is needed only when the connection has to be re-established first.
    """
    sync = session.sync_connection
    if sync is not None and not sync.closed and not sync.invalidated:
        return sync.connection.driver_connection
    raw = await session.get_raw_connection()
    return raw.driver_connection


async def fetch_one(session: AsyncConnection, statement: Any, params: dict[str, Any]) -> Row | None:
    """`fetch_all` of a statement that returns at most one row: that row, or None."""
    rows = await fetch_all(session, statement, params)
    return rows[0] if rows else None


async def _translated(
    session: AsyncConnection, driver: Any, sql: str, error: Exception
) -> Exception:
    """SQLAlchemy's exception for an asyncpg error, so every caller handles one family.

    A connection the error closed is invalidated, as SQLAlchemy does, so the pool replaces
    it instead of handing it out again.
    """
    import asyncpg

    sqlstate = str(getattr(error, "sqlstate", "") or "")
    lost = driver.is_closed() or isinstance(error, OSError | asyncpg.InterfaceError)
    if lost or sqlstate.startswith("08"):
        await session.invalidate()
        return sa_exc.OperationalError(sql, None, error, connection_invalidated=True)
    if not isinstance(error, asyncpg.PostgresError):
        return error
    if sqlstate.startswith("23"):
        return sa_exc.IntegrityError(sql, None, error)
    if sqlstate.startswith("22"):
        return sa_exc.DataError(sql, None, error)
    if sqlstate.startswith(("40", "53", "57")):
        return sa_exc.OperationalError(sql, None, error)
    return sa_exc.DBAPIError(sql, None, error)
