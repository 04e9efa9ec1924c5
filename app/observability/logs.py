"""Structured logging: readable lines in dev, JSON lines in production."""

from __future__ import annotations

import json
import logging
import sys
import time

from app.settings import Settings


class JsonFormatter(logging.Formatter):
    """One JSON object per line with the event, level, logger and message."""

    def format(self, record: logging.LogRecord) -> str:
        payload = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            payload["exc_info"] = self.formatException(record.exc_info)
        return json.dumps(payload, ensure_ascii=False)


def configure_logging(settings: Settings) -> None:
    """Route the `runyard` loggers to stderr in the configured format (idempotent)."""
    logger = logging.getLogger("runyard")
    logger.setLevel(settings.log_level.upper())
    if any(getattr(h, "_runyard", False) for h in logger.handlers):
        return
    handler = logging.StreamHandler(sys.stderr)
    if settings.log_format == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
    handler._runyard = True  # type: ignore[attr-defined]
    logger.addHandler(handler)
    logger.propagate = False
