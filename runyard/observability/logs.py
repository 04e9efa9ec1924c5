"""Structured logging: readable lines in dev, JSON lines in production, with the secrets of
every URL they quote masked (`runyard.domain.urls`).

Log calls follow one shape, `log.info("event_name key=%s other=%s", a, b)`. The JSON
formatter turns that into `{"event": "event_name", "key": a, "other": b, ...}`, and every
line written while a run executes also carries the run's context (run_id, thread_id,
attempt, instance), set once by the executor through `run_log_context`.
"""

from __future__ import annotations

import functools
import json
import logging
import re
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TextIO

import orjson

from runyard.domain.urls import masked_url
from runyard.settings import Settings

# A context variable is a key, not state: each asyncio task sees its own value.
_RUN_CONTEXT: ContextVar[dict[str, Any] | None] = ContextVar("runyard_run_context", default=None)

RUN_FIELDS = ("run_id", "thread_id", "attempt", "instance")
_FIELD = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=%[-#0 +]*\d*(?:\.\d+)?[sdrfigx]")
_PLACEHOLDER = re.compile(r"%[-#0 +]*\d*(?:\.\d+)?[sdrfigx]")
_EVENT = re.compile(r"^[a-z][a-z0-9_]*$")
_RESERVED = frozenset({"ts", "level", "logger", "event", "message", "exc_info"})


@contextmanager
def run_log_context(run_id: str, thread_id: str, attempt: int, instance: str) -> Iterator[None]:
    """Attach the run's identity to every log line written inside the block (this task)."""
    token = _RUN_CONTEXT.set(
        {"run_id": run_id, "thread_id": thread_id, "attempt": attempt, "instance": instance}
    )
    try:
        yield
    finally:
        _RUN_CONTEXT.reset(token)


class RunContextFilter(logging.Filter):
    """Copies the current run's context onto each record (never drops a record)."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Add run_id, thread_id, attempt and instance when a run is executing."""
        context = _RUN_CONTEXT.get()
        if context:
            for key, value in context.items():
                if not hasattr(record, key):
                    setattr(record, key, value)
        return True


def message_fields(record: logging.LogRecord) -> dict[str, Any]:
    """The `key=%s` pairs of a structured log call, with their argument values."""
    if not isinstance(record.msg, str) or not isinstance(record.args, tuple):
        return {}
    keys = _field_names(record.msg)
    if len(keys) != len(record.args):
        return {}
    return {key: _jsonable(value) for key, value in zip(keys, record.args, strict=True)}


@functools.lru_cache(maxsize=1024)
def _field_names(template: str) -> tuple[str, ...]:
    """The names of a message template's placeholders; empty unless every one is named.

    Templates are the constant first arguments of log calls, so each is parsed once.
    """
    keys = tuple(_FIELD.findall(template))
    if len(_PLACEHOLDER.findall(template)) != len(keys):
        return ()
    return keys


def _jsonable(value: Any) -> Any:
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return str(value)


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ts, level, logger, event, the call's fields, run context."""

    def format(self, record: logging.LogRecord) -> str:
        """Render the record as a single JSON line."""
        message = record.getMessage()
        payload: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
        }
        head = message.split(" ", 1)[0]
        if _EVENT.match(head):
            payload["event"] = head
        for key, value in message_fields(record).items():
            if key not in _RESERVED:
                payload[key] = value
        for key in RUN_FIELDS:
            value = getattr(record, key, None)
            if value is not None:
                payload.setdefault(key, value)
        payload["message"] = message
        if record.exc_info:
            payload["exc_info"] = self.formatException(record.exc_info)
        try:
            line = orjson.dumps(payload, default=str).decode()
        except TypeError:  # an integer beyond 64 bits: the json module writes it
            line = json.dumps(payload, ensure_ascii=False, default=str)
        # Whatever wrote a connection URL (a field, the message, an exception's text).
        return masked_url(line)


class TextFormatter(logging.Formatter):
    """Readable lines; a run's context is appended when the message does not carry it."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        """The classic line, plus `run_id=… attempt=…` missing from the message; the
        secrets of any URL in it masked."""
        line = masked_url(super().format(record))
        message = record.getMessage()
        extra = [
            f"{key}={getattr(record, key)}"
            for key in ("run_id", "thread_id", "attempt")
            if getattr(record, key, None) is not None and f"{key}=" not in message
        ]
        if not extra:
            return line
        first, newline, rest = line.partition("\n")
        return f"{first} {' '.join(extra)}{newline}{rest}"


class DropTraceback(logging.Filter):
    """Drops the next logged traceback that ends in an exception of one type, then retires.

    The ASGI server logs the whole traceback of an exception that fails the application's
    start-up. For errors whose message already says what to fix (ConfigError), that traceback
    only buries the message: the lifespan logs the message itself and installs this filter.
    """

    def __init__(self, logger: logging.Logger, error: type[BaseException]) -> None:
        super().__init__()
        self._logger = logger
        # As a traceback names the type: built-in exceptions without their module.
        module = "" if error.__module__ in ("builtins", "__main__") else f"{error.__module__}."
        self._last_line = f"{module}{error.__qualname__}"

    def filter(self, record: logging.LogRecord) -> bool:
        """False (drop) for the traceback of the error, once; True for everything else."""
        message = record.getMessage()
        if not message.startswith("Traceback"):
            return True
        # The exception's own line; its message may run over further lines.
        name = self._last_line
        if not any(line == name or line.startswith(name + ":") for line in message.splitlines()):
            return True
        self._logger.removeFilter(self)
        return False


class MaskedUrls(logging.Filter):
    """Masks the secrets of URLs in the lines of a logger Runyard does not format (the ASGI
    server's, which logs the traceback of a failed start-up: a driver's error may quote
    DATABASE_URL whole)."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Render the message and traceback now, masked; never drops a record."""
        message = record.getMessage()
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if "://" in message or "://" in (record.exc_text or ""):
            record.msg, record.args = masked_url(message), ()
            record.exc_text = masked_url(record.exc_text) if record.exc_text else None
        return True


def drop_startup_traceback(error: type[BaseException]) -> None:
    """Keep the ASGI server from printing the traceback of `error` failing the start-up."""
    logger = logging.getLogger("uvicorn.error")
    logger.addFilter(DropTraceback(logger, error))


class RunyardHandler(logging.StreamHandler[TextIO]):
    """The handler `configure_logging` gives the `runyard` logger: its class tells it from
    a handler the application added, so configuring twice adds it once."""


def configure_logging(settings: Settings) -> None:
    """Route the `runyard` loggers to stderr in the configured format (idempotent)."""
    server_log = logging.getLogger("uvicorn.error")
    if not any(isinstance(f, MaskedUrls) for f in server_log.filters):
        server_log.addFilter(MaskedUrls())
    logger = logging.getLogger("runyard")
    logger.setLevel(settings.log_level.upper())
    if any(isinstance(h, RunyardHandler) for h in logger.handlers):
        return
    handler = RunyardHandler(sys.stderr)
    if settings.resolved_log_format == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(TextFormatter())
    # On the handler, not the logger: a logger's filters skip records of its children.
    handler.addFilter(RunContextFilter())
    logger.addHandler(handler)
    logger.propagate = False
