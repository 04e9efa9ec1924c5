"""Tells apart what a failed statement of Runyard's storage code means for a run.

- **The store is away** (`store_unavailable`): the connection was lost, or the server is
  shutting down, restarting or refusing connections for now. Not the graph's fault: the
  run engine retries for a while, then hands the attempt back without counting it.
- **A statement fault** (`store_fault`): the server is there and refused this statement for
  a reason that may or may not pass on another try (a statement or lock timeout, a
  transaction conflict retried too often, exhausted resources; on SQLite, a lock held past
  the busy timeout, a full disk, an I/O error). It can be the graph's or its data's doing
  (a checkpoint too big to write in time fails the same way every time), so the attempt
  counts: the run fails with the reason after BG_JOB_MAX_RETRIES attempts.
- **A transaction conflict** (`transaction_conflict`: serialization failure, deadlock):
  the database rolled the transaction back so that another could go on; trying it again
  at once is the documented answer, a bounded number of times.

Anything else (a syntax error, a constraint, bad data) is an error of the attempt at once.
Recognized without importing the drivers (a SQLSTATE, SQLite's error code, a class's
module and name), and only when the failure came out of Runyard's own storage code, so a
node's own database error is still the node's error.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterator
from types import TracebackType
from typing import Literal, TypeVar

log = logging.getLogger("runyard.faults")
T = TypeVar("T")

Verdict = Literal["away", "fault", "other"]

# The store is away: connection exceptions (08…); the server shutting down or starting up
# (57P01 terminated by an administrator, 57P02 crash shutdown, 57P03 cannot connect now);
# the session ended by the server for idleness (57P05, 25P03); no connection slot free
# (53300 too many connections: refused at connect, before any statement ran).
_AWAY_CLASSES = ("08",)
_AWAY_STATES = frozenset({"57P01", "57P02", "57P03", "57P05", "25P03", "53300"})
# Statement faults: transaction rollback (40…), insufficient resources (53…: disk full, out
# of memory, temp_file_limit), operator intervention (57…: 57014 statement timeout or a
# cancel), 55P03 lock timeout. Class 53 counts although a full disk is rarely a run's own
# doing: the run's data can be what exhausts it (a huge checkpoint, its temporary files),
# and a fault no retry clears must end the run rather than hold it forever.
_FAULT_CLASSES = ("40", "53", "57")
_FAULT_STATES = frozenset({"55P03"})
CONFLICT_STATES = frozenset({"40001", "40P01"})
# SQLite's primary result codes that are faults: BUSY and LOCKED ("database is locked": a
# writer held the file past the busy timeout), NOMEM, IOERR, FULL, CANTOPEN. SQLite has no
# server to restart nor connection to lose, so none of its codes means "away".
_SQLITE_FAULTS = frozenset({5, 6, 7, 10, 13, 14})
_DRIVERS = ("asyncpg", "psycopg", "psycopg_pool", "sqlalchemy", "aiosqlite")
# The innermost Runyard frame of a store failure lies in one of these.
_STORAGE_MODULES = (
    "runyard.db.",
    "runyard.checkpoints.pg_library",
    "runyard.checkpoints.pg_rows",
    "runyard.checkpoints.pg_saver",
    "runyard.longterm_store.pg_store",
    "runyard.checkpoints.checkpointer",
    "runyard.checkpoints.sqlite_saver",
    "runyard.longterm_store.store",
)
# Driver errors that mean the connection is gone, by class name.
_LOST_CONNECTION_NAMES = frozenset(
    {
        "ConnectionDoesNotExistError",
        "ConnectionFailureError",
        "InterfaceError",
        "InternalClientError",
        "DisconnectionError",
        "PostgresConnectionError",
        "CannotConnectNowError",
        "AdminShutdownError",
        "CrashShutdownError",
    }
)
# How often a transaction conflict is tried again at once before it counts as a fault.
CONFLICT_RETRIES = 3


def store_unavailable(exc: BaseException) -> bool:
    """True when `exc` is the database being unreachable, raised by Runyard's storage code."""
    return _from_storage(exc) and _verdict(exc)[0] == "away"


def store_fault(exc: BaseException) -> str | None:
    """What the database refused, when `exc` is a statement fault of Runyard's storage
    code (see the module); None for anything else."""
    kind, cause = _verdict(exc)
    if kind != "fault" or not _from_storage(exc):
        return None
    code = _sqlstate(cause) or getattr(cause, "sqlite_errorname", None)
    described = f"{type(cause).__name__}: {str(cause).strip()[:300]}"
    return f"{described} ({code})" if code else described


def transaction_conflict(exc: BaseException) -> bool:
    """True when `exc` is a serialization failure or deadlock of Runyard's storage code."""
    kind, cause = _verdict(exc)
    return kind == "fault" and _sqlstate(cause) in CONFLICT_STATES and _from_storage(exc)


def _verdict(exc: BaseException) -> tuple[Verdict, BaseException]:
    """What `exc` says of the store, and the exception of its chain that says it.

    The outermost exception that tells decides (an invalidated connection, a SQLSTATE,
    SQLite's code, an OS error, a driver's connection error), so a generic wrapper such as
    SQLAlchemy's OperationalError is judged by the driver error it wraps. A driver's
    OperationalError that carries no code at all (psycopg's "the connection is lost", a
    pool that found no connection in time) means the store is away, and so does
    SQLAlchemy's pool finding no connection free in time: busy, for now, not refused.
    """
    generic: BaseException | None = None
    for current in _chain(exc):
        if getattr(current, "connection_invalidated", False) or isinstance(current, OSError):
            return "away", current
        sqlstate = _sqlstate(current)
        if sqlstate is not None:
            if sqlstate in _AWAY_STATES or sqlstate.startswith(_AWAY_CLASSES):
                return "away", current
            if sqlstate in _FAULT_STATES or sqlstate.startswith(_FAULT_CLASSES):
                return "fault", current
            return "other", current
        sqlite_code = getattr(current, "sqlite_errorcode", None)
        if isinstance(sqlite_code, int):
            return ("fault" if sqlite_code & 0xFF in _SQLITE_FAULTS else "other"), current
        names = {cls.__name__ for cls in type(current).__mro__ if _from_driver(cls)}
        if names & _LOST_CONNECTION_NAMES or _pool_timeout(current):
            return "away", current
        if generic is None and "OperationalError" in names:
            generic = current
    if generic is not None:
        return "away", generic
    return "other", exc


async def retry_while_store_unavailable(
    call: Callable[[], Awaitable[T]], budget_seconds: float, event: str, **fields: object
) -> T:
    """`call()`, tried again while the store is unreachable, for at most `budget_seconds`,
    and at once after a transaction conflict, at most CONFLICT_RETRIES times.

    Any other error, or the store still away when the budget is spent, is raised. Each retry
    logs `event` with `fields` and the error's class.
    """
    loop = asyncio.get_running_loop()
    give_up = loop.time() + budget_seconds
    pause = 0.2
    conflicts = 0
    while True:
        try:
            return await call()
        except Exception as exc:
            if transaction_conflict(exc) and conflicts < CONFLICT_RETRIES:
                conflicts += 1
                _log_retry(event, fields, exc)
                continue
            if not store_unavailable(exc) or loop.time() + pause > give_up:
                raise
            _log_retry(event, fields, exc)
        await asyncio.sleep(pause)
        pause = min(pause * 2, 2.0)


def _log_retry(event: str, fields: dict[str, object], exc: BaseException) -> None:
    described = " ".join(f"{key}=%s" for key in fields)
    log.warning(f"{event} {described} error=%s", *fields.values(), type(exc).__name__)


def missing_database(exc: BaseException) -> bool:
    """True when the server says the database of the URL does not exist (SQLSTATE 3D000)."""
    return any(
        _sqlstate(cause) == "3D000" or "InvalidCatalogName" in type(cause).__name__
        for cause in _chain(exc)
    )


def _sqlstate(exc: BaseException) -> str | None:
    sqlstate = getattr(exc, "sqlstate", None) or getattr(exc, "pgcode", None)
    return sqlstate if isinstance(sqlstate, str) and sqlstate else None


def _pool_timeout(exc: BaseException) -> bool:
    """SQLAlchemy's "QueuePool limit ... reached, connection timed out"."""
    cls = type(exc)
    return cls.__module__ == "sqlalchemy.exc" and cls.__name__ == "TimeoutError"


def _from_driver(cls: type) -> bool:
    return cls.__module__.partition(".")[0] in _DRIVERS


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _from_storage(exc: BaseException) -> bool:
    """The innermost `runyard.` frame of the traceback is storage code."""
    innermost: str | None = None
    tb: TracebackType | None = exc.__traceback__
    while tb is not None:
        module = str(tb.tb_frame.f_globals.get("__name__", ""))
        if module.startswith("runyard."):
            innermost = module
        tb = tb.tb_next
    return innermost is not None and innermost.startswith(_STORAGE_MODULES)
