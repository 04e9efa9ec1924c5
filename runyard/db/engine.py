"""Builds the async SQLAlchemy engine for PostgreSQL or SQLite."""

from __future__ import annotations

import asyncio
import functools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

import orjson
from sqlalchemy import event, text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from runyard.db.conninfo import PostgresUrl, asyncpg_connector, parse_postgres_url, sqlalchemy_url
from runyard.db.driver import POSTGRES_URL, STATEMENT_CALLBACK, DeferredConnection, StatementPool
from runyard.db.faults import missing_database
from runyard.db.unreachable import unreachable
from runyard.domain.errors import ConfigError

# What `session_factory` returns: each call opens a session (a pooled connection).
Sessions = Callable[[], AsyncConnection]
# The newest migration of migrations/versions (a test keeps the two in step). Knowing it
# here lets an instance whose database is current start without importing Alembic
# (runyard/db/schema.py reads the database's revision).
SCHEMA_REVISION = "0012"


class JsonCodec(Protocol):
    """How JSON columns are written and read when some of their keys are encrypted."""

    def dumps(self, document: Any) -> str:
        """JSON text of a column value."""
        ...

    def loads(self, text: str | bytes) -> Any:
        """A column value from its JSON text."""
        ...


# Connections to the SQLite file (`runyard dev`), all kept, none opened beyond them. Each is a
# thread of its own (aiosqlite), and SQLite writes one transaction at a time anyway: a burst of
# requests (hundreds of stream clients joining a thread) that opened ten more for a moment
# left their threads' memory in the process for good, about 13 KiB per client of the burst.
SQLITE_CONNECTIONS = 5


def create_engine(
    url: str, pool_size: int = 10, json_codec: JsonCodec | None = None
) -> AsyncEngine:
    """An engine tuned for the backend: pooled asyncpg (at most `pool_size` connections),
    or SQLite in WAL mode (at most `SQLITE_CONNECTIONS`).

    `json_codec` (encryption at rest, runyard/encryption/json_keys.py) writes and reads
    every JSON column instead of plain orjson; without it nothing is added per value.
    """
    dumps, loads = (json_codec.dumps, json_codec.loads) if json_codec else (json_dumps, json_loads)
    if url.startswith("sqlite"):
        db_path = url.split(":///", 1)[1]
        on_file = bool(db_path) and db_path != ":memory:"
        if on_file:
            Path(db_path).parent.mkdir(parents=True, exist_ok=True)
        # An in-memory database is one connection (SQLAlchemy's StaticPool): no pool to size.
        pool = {"pool_size": SQLITE_CONNECTIONS, "max_overflow": 0} if on_file else {}
        engine = create_async_engine(
            url,
            connect_args={"timeout": 30},
            json_serializer=dumps,
            json_deserializer=loads,
            **pool,
        )
        event.listen(engine.sync_engine, "connect", _sqlite_pragmas)
        return engine
    # asyncpg connects from the URL as libpq reads it (runyard/db/conninfo.py); the engine's
    # own URL only names the dialect, the user and the database.
    postgres = parse_postgres_url(url)
    # No pre-ping: it costs a round trip per checkout. A connection PostgreSQL dropped fails
    # its statement once and the pool then replaces every connection of that age.
    engine = create_async_engine(
        sqlalchemy_url(postgres),
        async_creator=asyncpg_connector(postgres),
        pool_size=pool_size,
        max_overflow=0,
        pool_timeout=30,
        json_serializer=dumps,
        json_deserializer=loads,
    )
    # Derived engines copy it: the statement pool connects the same way, messages say where.
    engine.update_execution_options(**{POSTGRES_URL: postgres})
    return engine


def postgres_url(engine: AsyncEngine) -> PostgresUrl:
    """The URL a PostgreSQL engine of `create_engine` connects to."""
    found: PostgresUrl = engine.get_execution_options()[POSTGRES_URL]
    return found


# JSON columns are (de)serialized with orjson, several times faster than the json module, except
# where orjson would differ: integers beyond 64 bits (it refuses to write them and reads them
# as floats) and text it does not accept (NaN); the json module takes those.
# A 19-digit run may not fit in 64 bits. Found by mapping ASCII digits to 1 and every other
# byte to 0 and looking for 19 ones: several times faster than a regular expression, which
# took longer than orjson's parse itself.
_DIGIT_BYTES = bytes(1 if 0x30 <= byte <= 0x39 else 0 for byte in range(256))
_LONG_DIGIT_RUN = b"\x01" * 19


def json_dumps(value: Any) -> str:
    """JSON text of a column value."""
    try:
        return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()
    except TypeError:
        return json.dumps(value)


def json_loads(text: str | bytes) -> Any:
    """A column value from its JSON text."""
    data = text.encode() if isinstance(text, str) else text
    if _LONG_DIGIT_RUN in data.translate(_DIGIT_BYTES):
        return json.loads(text)
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)


def on_each_statement(engine: AsyncEngine, callback: Callable[[], None]) -> None:
    """Call `callback` before each statement the engine sends (the statement counter).

    Call it before deriving engines from this one (`session_factory`): statements sent
    straight to the driver (runyard/db/driver.py) find the callback in the execution options,
    which a derived engine copies when it is made.
    """

    def before(*_args: Any) -> None:
        callback()

    event.listen(engine.sync_engine, "before_cursor_execute", before)
    engine.update_execution_options(**{STATEMENT_CALLBACK: callback})


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    cursor = dbapi_conn.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.close()


def session_factory(
    engine: AsyncEngine, autocommit: bool = False, statements: StatementPool | None = None
) -> Sessions:
    """Opens database sessions: pooled connections used with SQLAlchemy Core (no ORM).

    `async with sessions() as session, session.begin():` is a transaction; without
    `begin()` the statements run in one that is rolled back at the end. `autocommit`
    sessions run each statement on its own, outside any transaction: for reads and
    single-statement writes, which then cost no BEGIN and COMMIT/ROLLBACK round trips (and
    take no row locks beyond the statement). Given a PostgreSQL `statements` pool, an
    autocommit session is a `DeferredConnection`: the statements of runyard/db/driver.py run
    on that pool, and a SQLAlchemy connection is checked out only for the others.
    """
    if not autocommit:
        return functools.partial(StoreConnection, engine)
    engine = engine.execution_options(isolation_level="AUTOCOMMIT")
    if statements is None:
        return functools.partial(StoreConnection, engine)
    return functools.partial(DeferredConnection, engine, statements)


class StoreConnection(AsyncConnection):
    """A pooled connection, checked out here, in storage code, wherever a session is opened:
    a failure to get one (the database refusing connections, no connection free in time) is
    then the store's, as runyard/db/faults.py tells it apart, not the caller's."""

    async def start(self, is_ctxmanager: bool = False) -> AsyncConnection:
        """Check the connection out. A caller cancelled meanwhile (a stream whose client
        left, a poller stopped) waits for the checkout to end and gives the connection back:
        cancelled half-way, it would be left checked out to the garbage collector."""
        checkout = asyncio.ensure_future(super().start(is_ctxmanager))
        try:
            return await asyncio.shield(checkout)
        except asyncio.CancelledError:
            await asyncio.shield(_given_back(self, checkout))
            raise


async def _given_back(connection: AsyncConnection, checkout: asyncio.Future[Any]) -> None:
    """Return a connection whose checkout outlived its caller, once it is checked out."""
    try:
        await checkout
    except Exception:
        return  # never checked out: nothing to give back
    await connection.close()


async def require_database(engine: AsyncEngine) -> None:
    """Refuse to start on a PostgreSQL database that cannot be reached or does not exist,
    in one line naming where and what to check (never the password)."""
    if engine.dialect.name != "postgresql":
        return
    address = postgres_url(engine)
    try:
        async with engine.connect():
            pass
    except Exception as exc:
        if not missing_database(exc):
            raise unreachable(exc, address) from None
        url = engine.url
        raise ConfigError(
            f"the database {url.database!r} does not exist on {address.where}; "
            f"create it (createdb -h {url.host} -p {url.port or 5432} -U {url.username} "
            f'{url.database}, or CREATE DATABASE "{url.database}";) or set DATABASE_URL to '
            "one that exists"
        ) from None


async def ping(engine: AsyncEngine) -> None:
    """One round trip to the database (raises when it does not answer)."""
    async with engine.connect() as conn:
        await conn.execute(text("SELECT 1"))
