"""Secrets written in a URL are masked wherever a URL is logged or shown: the password of the
user part (unencoded `@` in it included), and secret query parameters (`?password=`)."""

from __future__ import annotations

import io
import logging
import sys
from pathlib import Path

import pytest

from runyard.domain.urls import masked_url
from runyard.observability.logs import JsonFormatter, TextFormatter, configure_logging
from runyard.settings import Settings

SECRETS = ("hunter2", "p@ss", "ss@", "s3cr", "tok3n", "zz9")


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        # The user part.
        ("redis://:secret@host:6379/10", "redis://:***@host:6379/10"),
        ("postgresql+asyncpg://user:p%40ss@db/x", "postgresql+asyncpg://user:***@db/x"),
        ("redis://host:6379/0", "redis://host:6379/0"),
        ("postgresql://postgres@127.0.0.1:5432/db", "postgresql://postgres@127.0.0.1:5432/db"),
        # An unencoded `@` in the password: the user part ends at the last `@` of the authority.
        ("redis://:p@ss@host:6379/0", "redis://:***@host:6379/0"),
        ("redis://user:p@ss@host/0", "redis://user:***@host/0"),
        ("redis://:ss@@host/0", "redis://:***@host/0"),
        # Secret query parameters, whatever their case, beside harmless ones.
        ("redis://127.0.0.1:6379/0?password=hunter2", "redis://127.0.0.1:6379/0?password=***"),
        (
            "redis://h/0?username=u&password=s3cr&db=1",
            "redis://h/0?username=u&password=***&db=1",
        ),
        ("rediss://h?ssl_password=zz9", "rediss://h?ssl_password=***"),
        ("postgresql://u:pw@h/db?sslpassword=x", "postgresql://u:***@h/db?sslpassword=***"),
        (
            "https://collector/v1?api_key=tok3n&Token=tok3n",
            "https://collector/v1?api_key=***&Token=***",
        ),
        # An `@` in a query value is not a user part.
        (
            "postgresql://u:pw@h/db?application_name=me@x",
            "postgresql://u:***@h/db?application_name=me@x",
        ),
        # Inside a message, several URLs.
        ("failed: redis://u:pw@h/1 unreachable", "failed: redis://u:***@h/1 unreachable"),
        (
            "a=redis://h/0?password=hunter2 b=redis://:p@ss@h2/1",
            "a=redis://h/0?password=*** b=redis://:***@h2/1",
        ),
    ],
)
def test_masked_url_hides_every_secret(url: str, shown: str) -> None:
    assert masked_url(url) == shown
    assert masked_url(shown) == shown  # masking twice changes nothing


def record(message: str, *args: object, error: BaseException | None = None) -> logging.LogRecord:
    """A log record as `log.warning(message, *args)` (with `error` as its exc_info) makes it."""
    exc_info = None
    if error is not None:
        try:
            raise error
        except type(error):
            exc_info = sys.exc_info()
    return logging.LogRecord("runyard.test", logging.WARNING, __file__, 1, message, args, exc_info)


@pytest.mark.parametrize("formatter", [JsonFormatter(), TextFormatter()], ids=["json", "text"])
def test_every_log_line_is_masked_whatever_logged_the_url(formatter: logging.Formatter) -> None:
    """A URL in a structured field, in the message itself or in an exception's text."""
    lines = [
        formatter.format(record("redis_down redis=%s", "redis://h/0?password=hunter2")),
        formatter.format(record("connect to redis://:p@ss@h/0 failed")),
        formatter.format(
            record("start_failed", error=OSError("cannot reach redis://u:tok3n@h:6379/0"))
        ),
    ]
    for line in lines:
        assert "***" in line, line
        assert not any(secret in line for secret in SECRETS), line


def test_the_servers_own_lines_are_masked_too(tmp_path: Path) -> None:
    """The ASGI server logs a failed start-up's traceback itself, with its own formatter."""
    configure_logging(Settings(_env_file=None, RUNYARD_DATA_DIR=tmp_path))  # type: ignore[call-arg]
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    server_log = logging.getLogger("uvicorn.error")
    server_log.addHandler(handler)
    try:
        try:
            raise ValueError("Could not parse URL from string 'postgresql://u:p@ss@db/x'")
        except ValueError:
            server_log.exception("Application startup failed. Exiting.")
        server_log.error("Traceback: redis://h/0?password=hunter2")
    finally:
        server_log.removeHandler(handler)
    written = stream.getvalue()
    assert "postgresql://u:***@db/x" in written and "redis://h/0?password=***" in written
    assert not any(secret in written for secret in SECRETS), written
