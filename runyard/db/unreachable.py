"""Why a PostgreSQL connection could not be made, in one line a person can act on.

A start-up (or `runyard migrate`) that cannot reach its database says where it tried
(host and port, or the socket), what went wrong and what to check, never the password and
never a traceback: the drivers' own errors (a refused connection, a timeout, SSL refused,
a rejected password) each name only part of that.
"""

from __future__ import annotations

import errno
import socket
import ssl
from collections.abc import Iterator

from runyard.domain.errors import ConfigError
from runyard.domain.postgres_url import PostgresUrl
from runyard.domain.urls import masked_url

# asyncpg's connection timeout when the URL sets no connect_timeout.
DRIVER_TIMEOUT = 60


class DatabaseUnreachableError(ConfigError):
    """The configured PostgreSQL server cannot be connected to."""


def unreachable(exc: BaseException, url: PostgresUrl) -> DatabaseUnreachableError:
    """The error to stop with when connecting to `url` failed with `exc`."""
    return DatabaseUnreachableError(
        f"cannot connect to PostgreSQL at {url.where}: {_reason(exc, url)}"
    )


def _reason(exc: BaseException, url: PostgresUrl) -> str:
    causes = list(_chain(exc))
    names = {type(cause).__name__ for cause in causes}
    texts = " ".join(str(cause) for cause in causes)
    if names & {"InvalidPasswordError", "InvalidAuthorizationSpecificationError"}:
        return (
            f"the server refused the login ({_first_line(causes, names)}); check the user "
            "and password of DATABASE_URL and the server's pg_hba.conf"
        )
    if "rejected SSL upgrade" in texts or "does not support SSL" in texts:
        return (
            "the server does not accept SSL, and sslmode asks for it; set sslmode=prefer "
            "or sslmode=disable in DATABASE_URL, or turn SSL on in the server"
        )
    if any(isinstance(cause, ssl.SSLError) for cause in causes):
        return (
            f"SSL failed ({_first_line(causes, names)}); check sslmode, sslrootcert, "
            "sslcert and sslkey in DATABASE_URL"
        )
    if any(isinstance(cause, FileNotFoundError | PermissionError) for cause in causes):
        return (
            f"{_first_line(causes, names)}; check the files that sslrootcert, sslcert and "
            "sslkey in DATABASE_URL name"
        )
    if any(isinstance(cause, TimeoutError) for cause in causes):
        waited = url.connect_timeout or DRIVER_TIMEOUT
        return (
            f"no answer within {waited:g} s (connect_timeout); check that the host and port "
            "are PostgreSQL's and that nothing between drops the connection"
        )
    if any(isinstance(cause, socket.gaierror) for cause in causes):
        return "the host name does not resolve; check the host of DATABASE_URL"
    if any(_refused(cause) for cause in causes) or "Connection refused" in texts:
        return (
            "connection refused; check that PostgreSQL is running and listens there, "
            "and the host and port of DATABASE_URL"
        )
    return f"{_first_line(causes, names)}; check DATABASE_URL"


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """The exception, what SQLAlchemy wrapped (`orig`), and its causes."""
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        current = todo.pop(0)
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        todo += [getattr(current, "orig", None), current.__cause__, current.__context__]
        todo += [e for e in getattr(current, "exceptions", ()) if isinstance(e, BaseException)]


def _refused(exc: BaseException) -> bool:
    return isinstance(exc, ConnectionRefusedError) or (
        isinstance(exc, OSError) and exc.errno == errno.ECONNREFUSED
    )


def _first_line(causes: list[BaseException], names: set[str]) -> str:
    """The innermost cause that says something, as `Type: message` on one line."""
    for cause in reversed(causes):
        text = " ".join(str(cause).split())
        if text:
            return masked_url(f"{type(cause).__name__}: {text}")
    return ", ".join(sorted(names))
