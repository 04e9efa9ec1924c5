"""Recognizes the store being unreachable (a restart, a killed connection, a failover).

Losing the store is not the graph's fault: the run engine hands such an attempt back, or
retries its final write, instead of recording `error`. Recognized without importing the
drivers (a class's module and name, a SQLSTATE), and only when the failure came out of
Runyard's own storage code, so a node's own network error is still the node's error.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterator
from types import TracebackType
from typing import TypeVar

log = logging.getLogger("runyard.faults")
T = TypeVar("T")

# Connection exceptions (08…), the server shutting down or starting up (57P01 terminated by
# an administrator, 57P02 crash shutdown, 57P03 cannot connect now).
_SQLSTATE_CLASSES = ("08",)
_SQLSTATES = frozenset({"57P01", "57P02", "57P03"})
_DRIVERS = ("asyncpg", "psycopg", "sqlalchemy", "aiosqlite")
# The innermost Runyard frame of a store failure lies in one of these.
_STORAGE_MODULES = (
    "runyard.db.",
    "runyard.graphs.pg_saver",
    "runyard.graphs.pg_store",
    "runyard.graphs.checkpointer",
    "runyard.graphs.store",
)
# Driver errors that mean the connection is gone, by class name.
_LOST_CONNECTION_NAMES = frozenset(
    {
        "ConnectionDoesNotExistError",
        "ConnectionFailureError",
        "InterfaceError",
        "InternalClientError",
        "OperationalError",
        "DisconnectionError",
        "PostgresConnectionError",
        "CannotConnectNowError",
        "AdminShutdownError",
        "CrashShutdownError",
    }
)


def store_unavailable(exc: BaseException) -> bool:
    """True when `exc` is the database being unreachable, raised by Runyard's storage code."""
    return _from_storage(exc) and any(_lost_connection(e) for e in _chain(exc))


async def retry_while_store_unavailable(
    call: Callable[[], Awaitable[T]], budget_seconds: float, event: str, **fields: object
) -> T:
    """`call()`, tried again while the store is unreachable, for at most `budget_seconds`.

    Any other error, or the store still away when the budget is spent, is raised. Each retry
    logs `event` with `fields` and the error's class.
    """
    loop = asyncio.get_running_loop()
    give_up = loop.time() + budget_seconds
    pause = 0.2
    while True:
        try:
            return await call()
        except Exception as exc:
            if not store_unavailable(exc) or loop.time() + pause > give_up:
                raise
            described = " ".join(f"{key}=%s" for key in fields)
            log.warning(f"{event} {described} error=%s", *fields.values(), type(exc).__name__)
        await asyncio.sleep(pause)
        pause = min(pause * 2, 2.0)


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _lost_connection(exc: BaseException) -> bool:
    if isinstance(exc, OSError):
        return True
    sqlstate = getattr(exc, "sqlstate", None) or getattr(exc, "pgcode", None)
    if isinstance(sqlstate, str) and (
        sqlstate in _SQLSTATES or sqlstate.startswith(_SQLSTATE_CLASSES)
    ):
        return True
    if getattr(exc, "connection_invalidated", False):
        return True
    return any(
        cls.__name__ in _LOST_CONNECTION_NAMES and cls.__module__.partition(".")[0] in _DRIVERS
        for cls in type(exc).__mro__
    )


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
