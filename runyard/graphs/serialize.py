"""Turns graph values (messages, interrupts, pydantic models...) into plain JSON values."""

from __future__ import annotations

import dataclasses
import enum
import uuid
from collections.abc import Mapping, Sequence
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from typing import Any

import orjson
from langgraph.types import Command, Interrupt, Send
from pydantic import BaseModel


def to_jsonable(value: Any) -> Any:
    """A JSON-compatible copy of `value`; unknown objects become their repr."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, Mapping):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [to_jsonable(v) for v in value]
    if isinstance(value, Interrupt):
        return {"value": to_jsonable(value.value), "id": value.id}
    if isinstance(value, Send):
        return {"node": value.node, "arg": to_jsonable(value.arg)}
    if isinstance(value, Command):
        return {k: to_jsonable(v) for k, v in dataclasses.asdict(value).items() if v is not None}
    if isinstance(value, BaseModel):
        return to_jsonable(value.model_dump(mode="json"))
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return to_jsonable(dataclasses.asdict(value))
    if isinstance(value, (datetime, date, time)):
        return value.isoformat()
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, (uuid.UUID, Decimal)):
        return str(value)
    if isinstance(value, enum.Enum):
        return to_jsonable(value.value)
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if isinstance(value, BaseException):
        return {"error": type(value).__name__, "message": str(value)}
    if hasattr(value, "to_json") and callable(value.to_json):
        return to_jsonable(value.to_json())
    if isinstance(value, Sequence):
        return [to_jsonable(v) for v in value]
    return repr(value)


def dumps(value: Any) -> str:
    """Compact JSON text of `value`, non-ASCII kept as itself."""
    return orjson.dumps(to_jsonable(value), option=orjson.OPT_NON_STR_KEYS).decode()
