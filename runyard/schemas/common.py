"""Wire types shared by every resource."""

from __future__ import annotations

import json
from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any, Literal, Self

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    Field,
    PlainSerializer,
    PlainValidator,
    StrictBool,
    WithJsonSchema,
    model_validator,
)
from pydantic_core import PydanticCustomError

from runyard.domain.status import CancelAction, MultitaskStrategy


def _not_a_boolean(value: Any) -> Any:
    # pydantic's lax mode reads true as 1; the document says number, so true is refused.
    if isinstance(value, bool):
        raise ValueError("expected a number, not true or false")
    return value


# Numbers and booleans of request bodies as the OpenAPI document declares them: a boolean
# is no number, and "yes" or 1 is no boolean.
NotBool = BeforeValidator(_not_a_boolean)
JsonInt = Annotated[int, NotBool]
JsonFloat = Annotated[float, NotBool]
JsonBool = StrictBool

# LangGraph Platform writes timestamps as `2024-06-25T17:10:33.109781+00:00`, not with `Z`.
IsoDatetime = Annotated[datetime, PlainSerializer(lambda value: value.isoformat(), return_type=str)]
Metadata = dict[str, Any]

# Metadata is indexed and returned with every row: keep it to labels, not payloads.
MAX_METADATA_BYTES = 64 * 1024


def _bounded_metadata(value: dict[str, Any]) -> dict[str, Any]:
    text = json.dumps(value, ensure_ascii=False, default=str)
    size = len(text.encode())
    if size > MAX_METADATA_BYTES:
        raise ValueError(
            f"metadata is {size} bytes serialized, over the limit of {MAX_METADATA_BYTES}; "
            "keep metadata to small labels and put large data in the input or state"
        )
    # json.dumps escapes a NUL as \\u0000; PostgreSQL can neither store nor search it.
    if "\\u0000" in text.replace("\\\\", ""):
        raise ValueError("metadata keys and values must not contain NUL (\\u0000) characters")
    return value


# Metadata a client sends; responses use plain `Metadata` (merged rows may grow past it).
MetadataIn = Annotated[dict[str, Any], AfterValidator(_bounded_metadata)]
Limit = Annotated[int, Field(ge=1, le=1000, description="Page size, 1 to 1000."), NotBool]
# Bounded so a huge offset is a 422, not a database integer overflow.
MAX_OFFSET = 2**31 - 1
Offset = Annotated[
    int,
    Field(ge=0, le=MAX_OFFSET, description=f"Number of rows to skip, 0 to {MAX_OFFSET}."),
    NotBool,
]

SortOrder = Literal["asc", "desc"]


def _wire_enum(enum: type[StrEnum]) -> tuple[PlainValidator, PlainSerializer, WithJsonSchema]:
    """A field of `enum` on the wire: any member's value is accepted and parsed into the
    member, anything else refused as pydantic refuses a Literal; the values stand inline in
    the OpenAPI document, as LangGraph's document has them (no component of their own)."""
    values = [member.value for member in enum]
    expected = " or ".join(
        filter(None, [", ".join(repr(v) for v in values[:-1]), repr(values[-1])])
    )

    def parse(value: Any) -> StrEnum:
        if isinstance(value, str) and value in values:
            return enum(value)
        raise PydanticCustomError("enum", "Input should be {expected}", {"expected": expected})

    return (
        PlainValidator(parse),
        PlainSerializer(str, return_type=str),
        WithJsonSchema({"type": "string", "enum": values}),
    )


# A multitask strategy and a cancel's action as the wire names them: every member of the
# enum (runyard/domain/status.py), so a new one is accepted without touching the schemas.
StrategyName = Annotated[MultitaskStrategy, *_wire_enum(MultitaskStrategy)]
StopName = Annotated[CancelAction, *_wire_enum(CancelAction)]


def _http_url(value: str) -> str:
    if not value.startswith(("http://", "https://")):
        raise ValueError("webhook must be an http:// or https:// URL")
    return value


# A webhook URL as a run or a cron names it: http(s) here; the URL policy (webhooks.url in
# langgraph.json) checks the rest, max_url_length included.
WebhookUrl = Annotated[str, AfterValidator(_http_url)]
Durability = Literal["sync", "async", "exit"]


class DurabilityFields(BaseModel):
    """`durability`, and LangGraph Platform's deprecated `checkpoint_during`, which stands for
    it when it is not given, as the platform reads it: runs and crons take both."""

    durability: Durability | None = None
    checkpoint_during: JsonBool | None = None

    @model_validator(mode="after")
    def _checkpoint_during_is_durability(self) -> Self:
        if self.durability is None and self.checkpoint_during is not None:
            # Only then: a field assigned counts as sent (a PATCH sending nothing is refused).
            self.durability = "async" if self.checkpoint_during else "exit"
        return self
