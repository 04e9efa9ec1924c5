"""The run path's statements sent straight to asyncpg, on connections of their own.

Every run executes a few statements that are built once (`functools.cache`): read its
assistant, insert it, claim it, read it, finish it, look for the thread's next run.
Through `AsyncConnection.execute`, each costs about 65 µs of CPU in SQLAlchemy (a greenlet
switch, the statement's cache key, an execution context, a result object) on top of
asyncpg's own work, and the session around it two more greenlets to check a connection
out and in. Here such a statement is compiled once for the session's dialect and executed
on a connection of the statement pool: the SQL text, the bound parameters (with each
type's bind processor) and the rows (with each type's result processor) are the ones
SQLAlchemy would use.

Only PostgreSQL autocommit sessions (`DeferredConnection`, where every statement stands
alone) take this path; any other session executes the statement through SQLAlchemy as
usual, so SQLite and transactions are untouched.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from functools import cache
from typing import Any

from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import Dialect
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from runyard.db.conninfo import asyncpg_connector

# An execution option of the engine: called once per statement sent by this module (the
# SQLAlchemy statement counter sees only statements SQLAlchemy executes itself).
STATEMENT_CALLBACK = "runyard_on_statement"
# An execution option of a PostgreSQL engine: its URL as libpq reads it (conninfo.PostgresUrl).
POSTGRES_URL = "runyard_postgres_url"

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


class _Connections:
    """At most `size` asyncpg connections, opened on demand, each lent to one caller at a time.

    asyncpg's own pool does more per acquire and release than these statements need (a
    proxy object, a future, an inactivity timer armed and cancelled, a timeout context, a
    reset): 5-9% of an instance's CPU per run, measured side by side. Here a slot is
    taken, the most recently returned connection is reused (or one is opened), and it is
    put back.
    """

    def __init__(self, connect: Callable[[], Awaitable[Any]], size: int) -> None:
        self._connect = connect
        self._slots = asyncio.Semaphore(size)
        self._idle: list[Any] = []
        self._closed = False

    async def acquire(self) -> Any:
        """An open connection; waits while `size` are lent out."""
        if self._closed:
            raise RuntimeError("the statement pool is closed")
        await self._slots.acquire()
        try:
            while self._idle:
                connection = self._idle.pop()
                if not connection.is_closed():
                    return connection
            # Every open connection is lent out (each holds a slot): at most `size` open.
            return await self._connect()
        except BaseException:
            self._slots.release()
            raise

    def release(self, connection: Any, reusable: bool) -> None:
        """Take a connection back; one that is not reusable is closed at once."""
        if reusable and not self._closed and not connection.is_closed():
            self._idle.append(connection)
        elif not connection.is_closed():
            connection.terminate()
        self._slots.release()

    async def close(self) -> None:
        """Close the idle connections; lent ones are closed when they come back."""
        self._closed = True
        idle, self._idle = self._idle, []
        await asyncio.gather(*(connection.close() for connection in idle), return_exceptions=True)


class StatementPool:
    """asyncpg connections of their own for the statements of this module.

    Each statement stands alone (autocommit), so it needs a connection only while it runs:
    taking one from SQLAlchemy's pool costs a greenlet (and a freshly mapped stack for it)
    at checkout and again at check-in, plus SQLAlchemy's connection set-up. Here it is a
    slot and a list pop. Connections are opened as needed, at most `size`, and get the
    same JSON codecs SQLAlchemy's asyncpg dialect installs, so rows read the same.
    """

    def __init__(self, engine: AsyncEngine, size: int) -> None:
        self._engine = engine
        self._size = size
        self._connections: _Connections | None = None

    async def open(self) -> None:
        """Make the pool ready; connections are made on first use."""
        dialect = self._engine.dialect
        # The engine's URL, as the engine itself connects (runyard/db/conninfo.py).
        connect_to = asyncpg_connector(self._engine.get_execution_options()[POSTGRES_URL])

        async def connect() -> Any:
            connection = await connect_to()
            try:
                adapted = _Adapted(connection)
                await dialect.setup_asyncpg_json_codec(adapted)  # type: ignore[attr-defined]
                await dialect.setup_asyncpg_jsonb_codec(adapted)  # type: ignore[attr-defined]
            except BaseException:
                connection.terminate()
                raise
            return connection

        self._connections = _Connections(connect, self._size)

    async def close(self) -> None:
        """Close every connection."""
        if self._connections is not None:
            await self._connections.close()
            self._connections = None

    def count_statement(self) -> None:
        """Tell the engine's statement counter (`on_each_statement`) of one statement.

        `fetch_all` counts the statements it sends here; a caller of `execute` or
        `fetch_sql` counts its own, with this or with a counter of its own.
        """
        counter = self._engine.get_execution_options().get(STATEMENT_CALLBACK)
        if counter is not None:
            counter()

    async def execute(self, sql: str, args: Sequence[Any]) -> None:
        """Run one statement given as asyncpg SQL (`$1`, `$2`…) with its arguments."""
        await self._on_connection(sql, lambda connection: connection.execute(sql, *args))

    async def execute_many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        """Run one statement once per row, in one round trip, all or nothing."""
        await self._on_connection(sql, lambda connection: connection.executemany(sql, rows))

    async def fetch_sql(self, sql: str, args: Sequence[Any]) -> list[Row]:
        """The rows of one statement given as asyncpg SQL, as dicts, values as asyncpg
        decodes them (JSON and JSONB parsed)."""
        records = await self._on_connection(sql, lambda connection: connection.fetch(sql, *args))
        return [dict(record.items()) for record in records]

    async def fetch(self, compiled: _Compiled, params: dict[str, Any]) -> list[Row]:
        """Run one compiled statement on a pooled connection; its rows."""
        args = compiled.arguments(params)
        records = await self._on_connection(
            compiled.sql, lambda connection: connection.fetch(compiled.sql, *args)
        )
        return [compiled.row(record) for record in records]

    async def _on_connection(self, sql: str, call: Callable[[Any], Awaitable[Any]]) -> Any:
        """`call` on a pooled connection; asyncpg's errors as SQLAlchemy's.

        The connection goes back for reuse after success or an error the server answered
        about the statement (it stays usable outside a transaction). After anything else
        (a lost connection, a server shutting down, a cancellation in the middle of a
        statement) its state is unknown: it is closed.
        """
        connections = self._connections
        if connections is None:
            raise RuntimeError("the statement pool is not open")
        connection = await connections.acquire()
        reusable = False
        try:
            result = await call(connection)
            reusable = True
            return result
        except Exception as error:
            import asyncpg

            sqlstate = str(getattr(error, "sqlstate", "") or "")
            reusable = isinstance(error, asyncpg.PostgresError) and not sqlstate.startswith(
                ("08", "57")
            )
            raise _translated(connection, sql, error) from error
        finally:
            connections.release(connection, reusable)


class _Adapted:
    """What SQLAlchemy's codec set-up expects of its connection adapter: the asyncpg one."""

    def __init__(self, connection: Any) -> None:
        self._connection = connection


class DeferredConnection(AsyncConnection):
    """An autocommit session that checks out a SQLAlchemy connection only if it needs one.

    Statements run through `fetch_all` and `fetch_one` go to the statement pool; a session
    that sends only those never touches SQLAlchemy's pool. A statement given to `execute`
    (the one method the db layer calls on its sessions) checks a connection out on first
    use, and the session returns it at the end. Every statement commits on its own
    (AUTOCOMMIT): such a session takes no transaction (`begin`).
    """

    __slots__ = ("statements",)

    def __init__(self, engine: Any, statements: StatementPool) -> None:
        super().__init__(engine)
        self.statements = statements

    @property  # type: ignore[misc]
    def dialect(self) -> Dialect:
        """The engine's dialect, known before any connection is checked out."""
        return self.sync_engine.dialect

    async def __aenter__(self) -> DeferredConnection:
        return self

    async def __aexit__(self, type_: Any, value: Any, traceback: Any) -> None:
        if self.sync_connection is not None:
            await asyncio.shield(self.close())

    async def execute(self, *args: Any, **kwargs: Any) -> Any:
        """Execute through SQLAlchemy, checking a connection out on first use."""
        if self.sync_connection is None:
            await self.start()
        return await super().execute(*args, **kwargs)


async def fetch_all(session: AsyncConnection, statement: Any, params: dict[str, Any]) -> list[Row]:
    """Execute a statement built once; its rows as dicts (none for a statement without).

    On a `DeferredConnection` the statement goes to the statement pool; on any other
    session (a transaction, SQLite) SQLAlchemy executes it. Compiled forms are kept for the
    life of the process, one per statement object and set of parameter names: never pass
    a statement built anew for each call.
    """
    if isinstance(session, DeferredConnection):
        compiled = _compile(statement, session.dialect, tuple(params))
        if compiled.direct:
            counter = session.engine.get_execution_options().get(STATEMENT_CALLBACK)
            if counter is not None:
                counter()
            return await session.statements.fetch(compiled, params)
    result = await session.execute(statement, params)
    return [dict(row) for row in result.mappings()] if result.returns_rows else []


async def fetch_one(session: AsyncConnection, statement: Any, params: dict[str, Any]) -> Row | None:
    """`fetch_all` of a statement that returns at most one row: that row, or None."""
    rows = await fetch_all(session, statement, params)
    return rows[0] if rows else None


def _translated(driver: Any, sql: str, error: Exception) -> Exception:
    """SQLAlchemy's exception for an asyncpg error, so every caller handles one family.

    A connection the error broke is closed, so the pool replaces it instead of handing it
    out again; its error says the connection was invalidated, as SQLAlchemy's would.
    """
    import asyncpg

    sqlstate = str(getattr(error, "sqlstate", "") or "")
    closed = driver.is_closed()
    lost = closed or isinstance(error, OSError | asyncpg.InterfaceError)
    if lost or sqlstate.startswith("08"):
        if not closed:
            driver.terminate()
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
