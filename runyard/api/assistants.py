"""Assistants routes of the Agent Protocol."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Path, Query, Response

from runyard.api.deps import AssistantServiceDep, CallerDep
from runyard.auth.guards import require_assistant
from runyard.auth.handlers import rewritten, sent_copy
from runyard.graphs.introspection import XRAY_PATTERN
from runyard.schemas.assistants import (
    Assistant,
    AssistantCreate,
    AssistantFilter,
    AssistantPatch,
    AssistantSchemas,
    AssistantSearch,
    AssistantVersion,
    AssistantVersionChange,
    AssistantVersionsSearch,
    DrawableGraph,
    GraphSchemas,
    to_wire,
    version_to_wire,
)

router = APIRouter(tags=["Assistants"])

AssistantId = Annotated[
    str, Path(description="An assistant id (UUID), or a graph id for its default assistant.")
]
# What create and update handlers may change in place, as LangGraph obeys it.
EDITABLE = ("metadata", "config", "context")
Recurse = Annotated[bool, Query(description="Include the subgraphs of subgraphs.")]


@router.post("/assistants", response_model=Assistant)
async def create_assistant(
    service: AssistantServiceDep, caller: CallerDep, body: AssistantCreate
) -> dict[str, Any]:
    """Create an assistant for a graph."""
    value = body.model_dump(mode="json")
    value["metadata"] = dict(body.metadata or {})
    sent = sent_copy(value)
    await caller.authorize("assistants", "create", value)
    body = rewritten(body, sent, value, EDITABLE)  # handlers may stamp metadata
    assistant = await service.create_assistant(body)
    if body.if_exists == "do_nothing":  # the existing assistant may be someone else's
        await require_assistant(service, caller, assistant.assistant_id, "read")
    return to_wire(assistant)


@router.post("/assistants/search", response_model=list[dict[str, Any]])
async def search_assistants(
    service: AssistantServiceDep,
    caller: CallerDep,
    response: Response,
    body: Annotated[AssistantSearch, Body()] = AssistantSearch(),
) -> list[dict[str, Any]]:
    """List assistants matching the filters, one page at a time."""
    auth_filter = await caller.authorize("assistants", "search", body.model_dump(mode="json"))
    if body.select:
        rows, total = await service.select_fields(body, auth_filter)
    else:
        found, total = await service.search_assistants(body, auth_filter)
        rows = [to_wire(assistant) for assistant in found]
    response.headers["X-Pagination-Total"] = str(total)
    if body.offset + len(rows) < total:
        response.headers["X-Pagination-Next"] = str(body.offset + body.limit)
    return rows


@router.post("/assistants/count", response_model=int)
async def count_assistants(
    service: AssistantServiceDep,
    caller: CallerDep,
    body: Annotated[AssistantFilter, Body()] = AssistantFilter(),
) -> int:
    """Count assistants matching the filters."""
    auth_filter = await caller.authorize("assistants", "search", body.model_dump(mode="json"))
    return await service.count_assistants(body, auth_filter)


@router.get("/assistants/{assistant_id}", response_model=Assistant)
async def get_assistant(
    service: AssistantServiceDep, caller: CallerDep, assistant_id: AssistantId
) -> dict[str, Any]:
    """Get an assistant at its current version."""
    await require_assistant(service, caller, assistant_id, "read")
    return to_wire(await service.get_assistant(assistant_id))


@router.patch("/assistants/{assistant_id}", response_model=Assistant)
async def patch_assistant(
    service: AssistantServiceDep, caller: CallerDep, assistant_id: AssistantId, body: AssistantPatch
) -> dict[str, Any]:
    """Change an assistant: records a new version and makes it current."""
    value = body.model_dump(mode="json")
    value["assistant_id"] = assistant_id
    value["metadata"] = dict(body.metadata or {})
    sent = sent_copy(value)
    await require_assistant(service, caller, assistant_id, "update", value)
    body = rewritten(body, sent, value, EDITABLE)  # handlers may stamp metadata
    return to_wire(await service.patch_assistant(assistant_id, body))


@router.delete("/assistants/{assistant_id}", status_code=204)
async def delete_assistant(
    service: AssistantServiceDep,
    caller: CallerDep,
    assistant_id: AssistantId,
    delete_threads: Annotated[
        bool, Query(description="Also delete the threads whose metadata names the assistant.")
    ] = False,
) -> Response:
    """Delete an assistant and all its versions."""
    await require_assistant(service, caller, assistant_id, "delete")
    await service.delete_assistant(assistant_id, delete_threads=delete_threads)
    return Response(status_code=204)


@router.post("/assistants/{assistant_id}/versions", response_model=list[AssistantVersion])
async def list_versions(
    service: AssistantServiceDep,
    caller: CallerDep,
    assistant_id: AssistantId,
    body: Annotated[AssistantVersionsSearch, Body()] = AssistantVersionsSearch(),
) -> list[dict[str, Any]]:
    """List an assistant's versions, newest first."""
    await require_assistant(service, caller, assistant_id, "read")
    return [version_to_wire(version) for version in await service.list_versions(assistant_id, body)]


@router.post("/assistants/{assistant_id}/latest", response_model=Assistant)
async def set_latest_version(
    service: AssistantServiceDep,
    caller: CallerDep,
    assistant_id: AssistantId,
    body: AssistantVersionChange,
) -> dict[str, Any]:
    """Make one of the assistant's versions the current one."""
    await require_assistant(service, caller, assistant_id, "update")
    return to_wire(await service.set_latest_version(assistant_id, body.version))


@router.get("/assistants/{assistant_id}/schemas", response_model=AssistantSchemas)
async def get_schemas(
    service: AssistantServiceDep, caller: CallerDep, assistant_id: AssistantId
) -> dict[str, Any]:
    """The JSON schemas of the assistant's graph."""
    await require_assistant(service, caller, assistant_id, "read")
    return await service.get_schemas(assistant_id)


@router.get("/assistants/{assistant_id}/graph", response_model=DrawableGraph)
async def get_graph(
    service: AssistantServiceDep,
    caller: CallerDep,
    assistant_id: AssistantId,
    xray: Annotated[
        str | None,
        Query(
            description="true, false, or a subgraph depth",
            json_schema_extra={"pattern": XRAY_PATTERN},
        ),
    ] = None,
) -> dict[str, Any]:
    """The assistant's graph as nodes and edges, subgraphs expanded with `xray`."""
    await require_assistant(service, caller, assistant_id, "read")
    return await service.get_drawable_graph(assistant_id, xray)


@router.get("/assistants/{assistant_id}/subgraphs", response_model=dict[str, GraphSchemas])
async def get_subgraphs(
    service: AssistantServiceDep,
    caller: CallerDep,
    assistant_id: AssistantId,
    recurse: Recurse = False,
) -> dict[str, dict[str, Any]]:
    """The schemas of the assistant graph's subgraphs, keyed by namespace."""
    await require_assistant(service, caller, assistant_id, "read")
    return await service.get_subgraphs(assistant_id, None, recurse)


@router.get(
    "/assistants/{assistant_id}/subgraphs/{namespace}", response_model=dict[str, GraphSchemas]
)
async def get_subgraphs_in_namespace(
    service: AssistantServiceDep,
    caller: CallerDep,
    assistant_id: AssistantId,
    namespace: str,
    recurse: Recurse = False,
) -> dict[str, dict[str, Any]]:
    """The schemas of the subgraph at `namespace` (and below it with `recurse`)."""
    await require_assistant(service, caller, assistant_id, "read")
    return await service.get_subgraphs(assistant_id, namespace, recurse)
