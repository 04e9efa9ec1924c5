"""Shared pieces of the assistants API tests: expected shapes, tags and error capture."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable
from datetime import datetime
from typing import Any

import httpx
import pytest

ASSISTANT_KEYS = {
    "assistant_id",
    "graph_id",
    "config",
    "context",
    "metadata",
    "version",
    "name",
    "description",
    "created_at",
    "updated_at",
}
VERSION_KEYS = ASSISTANT_KEYS - {"updated_at"}
SCHEMA_KEYS = {"input_schema", "output_schema", "state_schema", "config_schema", "context_schema"}


def new_tag() -> dict[str, str]:
    """Metadata that marks what one test creates, so filters never see other tests' rows."""
    return {"test_tag": uuid.uuid4().hex}


async def http_error(call: Awaitable[Any]) -> tuple[int, str]:
    """The status code and detail of a call expected to fail."""
    with pytest.raises(httpx.HTTPStatusError) as caught:
        await call
    response = caught.value.response
    return response.status_code, str(response.json().get("detail", ""))


def parse_time(value: Any) -> datetime:
    """An ISO 8601 timestamp from the server, which must carry a zero UTC offset."""
    parsed = datetime.fromisoformat(value)
    offset = parsed.utcoffset()
    assert offset is not None and offset.total_seconds() == 0, value
    return parsed
