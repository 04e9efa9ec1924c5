"""What each driver is given of a PostgreSQL URL (runyard/domain/postgres_url.py): the
engine's SQLAlchemy URL, and a function opening an asyncpg connection as libpq would."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import unquote, urlsplit

from sqlalchemy.engine import URL

from runyard.domain.postgres_url import PostgresUrl, libpq_url, parse_postgres_url

__all__ = ["PostgresUrl", "asyncpg_connector", "libpq_url", "parse_postgres_url", "sqlalchemy_url"]


def sqlalchemy_url(url: PostgresUrl) -> URL:
    """The engine's URL: the dialect, user and database (asyncpg connects from the DSN)."""
    split = urlsplit(url.libpq)
    given = dict(url.parameters)
    host = split.hostname if split.hostname and "," not in url.netloc else None
    return URL.create(
        "postgresql+asyncpg",
        username=given.get("user", unquote(split.username or "")) or None,
        password=given.get("password", unquote(split.password or "")) or None,
        host=host,
        port=split.port if host else None,
        database=given.get("dbname", unquote(url.path.lstrip("/"))) or None,
    )


def asyncpg_connector(url: PostgresUrl, **options: Any) -> Callable[[], Awaitable[Any]]:
    """A function opening one asyncpg connection to `url` (with asyncpg `options`)."""
    dsn, timeout = url.asyncpg_dsn, url.connect_timeout
    if timeout is not None:
        options = {"timeout": timeout, **options}

    async def connect() -> Any:
        import asyncpg

        return await asyncpg.connect(dsn, **options)

    return connect
