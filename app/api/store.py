"""Store routes of the Agent Protocol: long-term memory items shared by every thread."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Query, Response

from app.api.deps import RuntimeDep
from app.schemas.store import (
    Item,
    ListNamespacesResponse,
    SearchItemsResponse,
    StoreDelete,
    StoreNamespaces,
    StorePut,
    StoreSearch,
)
from app.services import store as service

router = APIRouter(tags=["Store"])


@router.put("/store/items", status_code=204)
async def put_item(runtime: RuntimeDep, body: StorePut) -> Response:
    """Create or replace an item."""
    await service.put_item(runtime, body)
    return Response(status_code=204)


@router.get("/store/items", response_model=Item | None)
async def get_item(
    runtime: RuntimeDep,
    key: Annotated[str, Query(min_length=1)],
    namespace: Annotated[list[str] | None, Query()] = None,
    refresh_ttl: bool | None = None,
) -> dict[str, Any] | None:
    """One item (null when there is none); `namespace` is dotted: `users.u-123`."""
    labels = service.parse_namespace_param(namespace)
    return await service.get_item(runtime, labels, key, refresh_ttl)


@router.delete("/store/items", status_code=204)
async def delete_item(runtime: RuntimeDep, body: StoreDelete) -> Response:
    """Delete an item."""
    await service.delete_item(runtime, body)
    return Response(status_code=204)


@router.post("/store/items/search", response_model=SearchItemsResponse)
async def search_items(
    runtime: RuntimeDep, body: Annotated[StoreSearch, Body()] = StoreSearch()
) -> dict[str, Any]:
    """Items under a namespace prefix, filtered, or ranked by a semantic query."""
    return {"items": await service.search_items(runtime, body)}


@router.post("/store/namespaces", response_model=ListNamespacesResponse)
async def list_namespaces(
    runtime: RuntimeDep, body: Annotated[StoreNamespaces, Body()] = StoreNamespaces()
) -> dict[str, Any]:
    """Namespaces matching a prefix and suffix, up to a depth."""
    return {"namespaces": await service.list_namespaces(runtime, body)}
