"""Long-term store use cases: items by namespace and key, search, namespaces, TTLs."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from langgraph.store.base import (
    NOT_PROVIDED,
    BaseStore,
    InvalidNamespaceError,
    Item,
    SearchItem,
)

from runyard.domain.errors import InvalidInputError
from runyard.domain.user_bounds import StoreBounds
from runyard.longterm_store.store import StoreOptions
from runyard.schemas.store import StoreDelete, StoreNamespaces, StorePut, StoreSearch

log = logging.getLogger("runyard.store")


def namespace_labels(
    labels: Sequence[str] | None, what: str = "namespace", *, allow_empty: bool = False
) -> tuple[str, ...]:
    """A namespace as a tuple, or InvalidInputError saying which label is wrong."""
    labels = tuple(labels or ())
    if not labels and not allow_empty:
        raise InvalidInputError(f"{what} must have at least one label, e.g. ['users', 'u-123']")
    for label in labels:
        if not label or "." in label or "\x00" in label:
            raise InvalidInputError(
                f"{what} label {label!r} must be a non-empty string without periods"
            )
    return labels


def parse_namespace_param(values: list[str] | None) -> tuple[str, ...]:
    """The `namespace` query parameter: one dotted string (as langgraph-sdk sends it) or a list."""
    values = values or []
    if len(values) == 1:
        values = values[0].split(".")
    return namespace_labels(values)


def _stamp(value: datetime) -> str:
    # The SQLite store hands back naive UTC timestamps.
    return (value.replace(tzinfo=UTC) if value.tzinfo is None else value).isoformat()


def to_wire(item: Item) -> dict[str, Any]:
    """An item as clients receive it; search results also carry their score."""
    wire: dict[str, Any] = {
        "namespace": list(item.namespace),
        "key": item.key,
        "value": item.value,
        "created_at": _stamp(item.created_at),
        "updated_at": _stamp(item.updated_at),
    }
    if isinstance(item, SearchItem):
        wire["score"] = item.score
    return wire


class StoreService:
    """Long-term store use cases on the configured store."""

    def __init__(self, store: BaseStore, options: StoreOptions, bounds: StoreBounds) -> None:
        self.store = store
        self.options = options
        self.bounds = bounds

    def check_new_item(self, namespace: Sequence[str], key: str) -> None:
        """OverBoundError when a new item's key or namespace, as the client sent them, is
        past RUNYARD_STORE_MAX_KEY_CHARS, _LABEL_CHARS or _NAMESPACE_LABELS."""
        self.bounds.check_item(namespace, key)

    async def put_item(self, body: StorePut) -> None:
        """Create or replace an item; without `ttl` the configured default TTL applies."""
        namespace = namespace_labels(body.namespace)
        try:
            await self.store.aput(
                namespace,
                body.key,
                body.value,
                index=body.index,
                ttl=NOT_PROVIDED if body.ttl is None else body.ttl,
            )
        except InvalidNamespaceError as exc:
            raise InvalidInputError(str(exc)) from None

    async def get_item(
        self, namespace: tuple[str, ...], key: str, refresh_ttl: bool | None
    ) -> dict[str, Any] | None:
        """The item, or None; reading refreshes its TTL unless told otherwise."""
        item = await self.store.aget(namespace, key, refresh_ttl=refresh_ttl)
        return to_wire(item) if item is not None else None

    async def delete_item(self, body: StoreDelete) -> None:
        """Delete an item (nothing happens when it does not exist)."""
        await self.store.adelete(namespace_labels(body.namespace), body.key)

    async def search_items(self, body: StoreSearch) -> list[dict[str, Any]]:
        """Items under a namespace prefix: by filter, newest first, or by meaning with `query`.

        Without `store.index` a `query` ranks nothing: the items come as without it, each with
        `score: null`, as on LangGraph's server.
        """
        prefix = namespace_labels(body.namespace_prefix, "namespace_prefix", allow_empty=True)
        try:
            items = await self.store.asearch(
                prefix,
                query=body.query if self.options.semantic else None,
                filter=body.filter,
                limit=body.limit,
                offset=body.offset,
                refresh_ttl=body.refresh_ttl,
            )
        except ValueError as exc:  # the stores reject unknown filter operators this way
            raise InvalidInputError(f"cannot search the store: {exc}") from None
        return [to_wire(item) for item in items]

    async def list_namespaces(self, body: StoreNamespaces) -> list[list[str]]:
        """Namespaces matching a prefix and suffix, cut at `max_depth` labels."""
        prefix = namespace_labels(body.prefix, "prefix", allow_empty=True) or None
        suffix = namespace_labels(body.suffix, "suffix", allow_empty=True) or None
        found = await self.store.alist_namespaces(
            prefix=prefix,
            suffix=suffix,
            max_depth=body.max_depth,
            limit=body.limit,
            offset=body.offset,
        )
        return [list(namespace) for namespace in found]
