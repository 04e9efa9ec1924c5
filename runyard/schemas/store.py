"""Wire models of the long-term store, as langgraph-sdk's `client.store` sends and expects them."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from runyard.schemas.common import JsonBool, JsonFloat, JsonInt, NotBool

# Labels are joined with periods in the namespace's stored form (as LangGraph's stores do).
NamespaceLabel = Annotated[str, Field(json_schema_extra={"pattern": "^[^.\\x00]+$"})]
Namespace = list[NamespaceLabel]
# Minutes, as LangGraph's stores count them.
# From 0.06 s (smaller ones print in a notation PostgreSQL intervals refuse) to 1,000 years
# (larger ones overflow the expiry date).
TtlMinutes = Annotated[
    float, Field(ge=0.001, le=525_600_000, description="Time to live in minutes."), NotBool
]


class StorePut(BaseModel):
    """Body of PUT /store/items."""

    model_config = ConfigDict(extra="forbid")

    namespace: Namespace
    key: str = Field(min_length=1)
    value: dict[str, Any]
    index: Literal[False] | list[str] | None = None
    ttl: TtlMinutes | None = None


class StoreDelete(BaseModel):
    """Body of DELETE /store/items."""

    model_config = ConfigDict(extra="forbid")

    namespace: Namespace
    key: str = Field(min_length=1)


class StoreSearch(BaseModel):
    """Body of POST /store/items/search."""

    model_config = ConfigDict(extra="forbid")

    namespace_prefix: Namespace | None = None
    filter: dict[str, Any] | None = None
    limit: JsonInt = Field(default=10, ge=1, le=1000)
    offset: JsonInt = Field(default=0, ge=0, le=2**31 - 1)
    query: str | None = None
    refresh_ttl: JsonBool | None = None


class StoreNamespaces(BaseModel):
    """Body of POST /store/namespaces."""

    model_config = ConfigDict(extra="forbid")

    prefix: Namespace | None = None
    suffix: Namespace | None = None
    max_depth: Annotated[int, Field(ge=1, le=2**31 - 1), NotBool] | None = None
    limit: JsonInt = Field(default=100, ge=1, le=1000)
    offset: JsonInt = Field(default=0, ge=0, le=2**31 - 1)


class Item(BaseModel):
    """A stored item."""

    namespace: Namespace
    key: str
    value: dict[str, Any]
    created_at: str
    updated_at: str


class SearchItem(Item):
    """An item found by a search; `score` is set for semantic (query) searches."""

    score: JsonFloat | None = None


class SearchItemsResponse(BaseModel):
    """Answer of POST /store/items/search."""

    items: list[SearchItem]


class ListNamespacesResponse(BaseModel):
    """Answer of POST /store/namespaces."""

    namespaces: list[Namespace]
