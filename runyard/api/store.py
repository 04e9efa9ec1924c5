"""Store routes of the Agent Protocol: long-term memory items shared by every thread."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Query, Response

from runyard.api.deps import CallerDep, StoreServiceDep
from runyard.auth.handlers import Caller
from runyard.schemas.store import (
    Item,
    ListNamespacesResponse,
    SearchItemsResponse,
    StoreDelete,
    StoreNamespaces,
    StorePut,
    StoreSearch,
)
from runyard.services.store import parse_namespace_param

router = APIRouter(tags=["Store"])


async def _scoped(caller: Caller, action: str, value: dict[str, Any]) -> list[str]:
    """The namespace after the store handlers had their say (they may rewrite it or refuse)."""
    value["namespace"] = tuple(value.get("namespace") or ())
    await caller.authorize("store", action, value)
    return list(value["namespace"] or ())


@router.put("/store/items", status_code=204)
async def put_item(service: StoreServiceDep, caller: CallerDep, body: StorePut) -> Response:
    """Create or replace an item."""
    # As the client sent them: a handler that prefixes the user's namespace adds its label.
    service.check_new_item(body.namespace, body.key)
    value = {"namespace": body.namespace, "key": body.key, "value": body.value}
    body = body.model_copy(update={"namespace": await _scoped(caller, "put", value)})
    await service.put_item(body)
    return Response(status_code=204)


@router.get("/store/items", response_model=Item | None)
async def get_item(
    service: StoreServiceDep,
    caller: CallerDep,
    key: Annotated[str, Query(min_length=1)],
    namespace: Annotated[list[str] | None, Query()] = None,
    refresh_ttl: bool | None = None,
) -> dict[str, Any] | None:
    """One item (null when there is none); `namespace` is dotted: `users.u-123`."""
    labels = parse_namespace_param(namespace)
    labels = tuple(await _scoped(caller, "get", {"namespace": labels, "key": key}))
    return await service.get_item(labels, key, refresh_ttl)


@router.delete("/store/items", status_code=204)
async def delete_item(service: StoreServiceDep, caller: CallerDep, body: StoreDelete) -> Response:
    """Delete an item."""
    value = {"namespace": body.namespace, "key": body.key}
    body = body.model_copy(update={"namespace": await _scoped(caller, "delete", value)})
    await service.delete_item(body)
    return Response(status_code=204)


@router.post("/store/items/search", response_model=SearchItemsResponse)
async def search_items(
    service: StoreServiceDep,
    caller: CallerDep,
    body: Annotated[StoreSearch, Body()] = StoreSearch(),
) -> dict[str, Any]:
    """Items under a namespace prefix, filtered, or ranked by a semantic query."""
    value = body.model_dump(mode="json")
    value["namespace"] = body.namespace_prefix
    body = body.model_copy(update={"namespace_prefix": await _scoped(caller, "search", value)})
    return {"items": await service.search_items(body)}


@router.post("/store/namespaces", response_model=ListNamespacesResponse)
async def list_namespaces(
    service: StoreServiceDep,
    caller: CallerDep,
    body: Annotated[StoreNamespaces, Body()] = StoreNamespaces(),
) -> dict[str, Any]:
    """Namespaces matching a prefix and suffix, up to a depth."""
    value = body.model_dump(mode="json")
    value["namespace"] = body.prefix
    body = body.model_copy(update={"prefix": await _scoped(caller, "list_namespaces", value)})
    return {"namespaces": await service.list_namespaces(body)}
