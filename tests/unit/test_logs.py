"""Structured logs: JSON fields from `key=%s` calls and the executing run's context."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import traceback
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from runyard.domain.errors import ConfigError
from runyard.observability.logs import (
    DropTraceback,
    JsonFormatter,
    RunContextFilter,
    RunyardHandler,
    TextFormatter,
    configure_logging,
    message_fields,
    run_log_context,
)
from runyard.settings import Settings


@dataclass
class Capture:
    """A private logger writing through the Runyard filter into a string buffer."""

    logger: logging.Logger
    buffer: io.StringIO
    handler: logging.StreamHandler[io.StringIO]

    def use(self, formatter: logging.Formatter) -> logging.Logger:
        """Format with `formatter`; returns the logger to write to."""
        self.handler.setFormatter(formatter)
        return self.logger

    def lines(self) -> list[dict[str, object]]:
        """The JSON objects written so far."""
        return [json.loads(line) for line in self.buffer.getvalue().splitlines() if line]


@pytest.fixture
def captured() -> Iterator[Capture]:
    """A Capture, detached after the test."""
    buffer = io.StringIO()
    handler = logging.StreamHandler(buffer)
    handler.addFilter(RunContextFilter())
    logger = logging.getLogger("runyard.test_logs")
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    try:
        yield Capture(logger, buffer, handler)
    finally:
        logger.removeHandler(handler)


def test_json_line_has_event_and_fields_of_the_call(captured: Capture) -> None:
    logger = captured.use(JsonFormatter())
    logger.info("run_created run_id=%s thread_id=%s attempts=%d", "r-1", "t-1", 3)
    (line,) = captured.lines()
    assert line["event"] == "run_created"
    assert line["run_id"] == "r-1"
    assert line["thread_id"] == "t-1"
    assert line["attempts"] == 3
    assert line["level"] == "info"
    assert line["logger"] == "runyard.test_logs"
    assert line["message"] == "run_created run_id=r-1 thread_id=t-1 attempts=3"
    assert str(line["ts"]).endswith("Z")


def test_json_line_keeps_unicode_and_integers_beyond_64_bits(captured: Capture) -> None:
    logger = captured.use(JsonFormatter())
    logger.info("graph_loaded name=%s size=%d", "grafo é", 2**70)
    logger.info("graph_loaded name=%s size=%d", "ok", 7)
    big, small = captured.lines()
    assert big["name"] == "grafo é"
    assert big["size"] == 2**70
    assert small["size"] == 7
    assert "é" in captured.buffer.getvalue()  # written as is, not escaped


def test_every_line_inside_a_run_carries_its_context(captured: Capture) -> None:
    logger = captured.use(JsonFormatter())
    with run_log_context("run-9", "thread-9", 2, "host:1:abc"):
        logger.warning("graph_step_slow node=%s", "first")
        logger.info("free text without fields")
    logger.info("after_the_run")
    inside_one, inside_two, outside = captured.lines()
    for line in (inside_one, inside_two):
        assert line["run_id"] == "run-9"
        assert line["thread_id"] == "thread-9"
        assert line["attempt"] == 2
        assert line["instance"] == "host:1:abc"
    assert inside_one["node"] == "first"
    assert "run_id" not in outside and "instance" not in outside


async def test_run_context_is_private_to_each_task(captured: Capture) -> None:
    logger = captured.use(JsonFormatter())

    async def run(run_id: str) -> None:
        with run_log_context(run_id, f"t-{run_id}", 1, "i"):
            await asyncio.sleep(0.01)
            logger.info("step_done")

    await asyncio.gather(run("a"), run("b"))
    assert sorted((line["run_id"], line["thread_id"]) for line in captured.lines()) == [
        ("a", "t-a"),
        ("b", "t-b"),
    ]


def test_message_fields_of_the_call_win_over_the_context(captured: Capture) -> None:
    logger = captured.use(JsonFormatter())
    with run_log_context("outer", "t", 1, "i"):
        logger.info("next_run_dispatched run_id=%s", "inner")
    (line,) = captured.lines()
    assert line["run_id"] == "inner"


def test_json_line_keeps_the_traceback(captured: Capture) -> None:
    logger = captured.use(JsonFormatter())
    try:
        raise ValueError("bad input")
    except ValueError:
        logger.exception("run_failed run_id=%s", "r-2")
    (line,) = captured.lines()
    assert line["run_id"] == "r-2"
    assert "ValueError: bad input" in str(line["exc_info"])


def test_unpaired_placeholders_are_not_turned_into_fields() -> None:
    record = logging.LogRecord("x", logging.INFO, __file__, 1, "moved %s to %s", ("a", "b"), None)
    assert message_fields(record) == {}
    record = logging.LogRecord("x", logging.INFO, __file__, 1, "n=%s and %s", ("a", "b"), None)
    assert message_fields(record) == {}
    record = logging.LogRecord("x", logging.INFO, __file__, 1, "ids=%r", ([1, 2],), None)
    assert message_fields(record) == {"ids": "[1, 2]"}


def test_text_lines_gain_missing_run_fields(captured: Capture) -> None:
    logger = captured.use(TextFormatter())
    with run_log_context("r-7", "t-7", 4, "i"):
        logger.info("run_finished run_id=%s status=%s", "r-7", "success")
    text = captured.buffer.getvalue().strip()
    assert "run_finished run_id=r-7 status=success" in text
    assert text.endswith("thread_id=t-7 attempt=4")
    assert text.count("run_id=") == 1


def test_production_defaults_to_json_and_dev_to_text() -> None:
    serve = Settings(DATABASE_URL="postgresql://u@h/db")
    dev = Settings(DATABASE_URL="")
    forced = Settings(DATABASE_URL="postgresql://u@h/db", RUNYARD_LOG_FORMAT="text")
    assert serve.resolved_log_format == "json"
    assert dev.resolved_log_format == "text"
    assert forced.resolved_log_format == "text"


def test_configured_handler_filters_child_loggers() -> None:
    root = logging.getLogger("runyard")
    before = list(root.handlers)
    try:
        configure_logging(Settings(DATABASE_URL="", RUNYARD_LOG_FORMAT="json"))
        configure_logging(Settings(DATABASE_URL="", RUNYARD_LOG_FORMAT="json"))
        handlers = [h for h in root.handlers if isinstance(h, RunyardHandler)]
        assert len(handlers) == 1
        assert any(isinstance(f, RunContextFilter) for f in handlers[0].filters)
    finally:
        for handler in list(root.handlers):
            if handler not in before:
                root.removeHandler(handler)


def _traceback_of(error: BaseException) -> str:
    try:
        raise error
    except BaseException:
        return traceback.format_exc()


def test_drop_traceback_drops_the_errors_traceback_once_and_nothing_else() -> None:
    logger = logging.getLogger("runyard.test.drop_traceback")
    buffer = io.StringIO()
    handler = logging.StreamHandler(buffer)
    logger.addHandler(handler)
    logger.propagate = False
    logger.addFilter(DropTraceback(logger, ConfigError))
    try:
        logger.error(_traceback_of(ValueError("not a config error")))
        logger.error("Application startup failed. Exiting.")
        logger.error(_traceback_of(ConfigError("graph 'agent': file agent.py does not exist")))
        logger.error(_traceback_of(ConfigError("a second one is shown")))
    finally:
        logger.removeHandler(handler)

    text = buffer.getvalue()
    assert "ValueError: not a config error" in text
    assert "Application startup failed" in text
    assert "agent.py" not in text
    assert "ConfigError: a second one is shown" in text
    assert logger.filters == []
