"""Wire types shared by every resource."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import Field, PlainSerializer

# LangGraph Platform writes timestamps as `2024-06-25T17:10:33.109781+00:00`, not with `Z`.
IsoDatetime = Annotated[datetime, PlainSerializer(lambda value: value.isoformat(), return_type=str)]
Metadata = dict[str, Any]
Limit = Annotated[int, Field(ge=1, le=1000, description="Page size, 1 to 1000.")]
Offset = Annotated[int, Field(ge=0, description="Number of rows to skip.")]

SortOrder = Literal["asc", "desc"]
