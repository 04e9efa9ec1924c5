"""Threads routes of the Agent Protocol: the thread resource, its state and its history."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Header, Query, Response
from pydantic import WithJsonSchema

from runyard.api.deps import (
    CallerDep,
    RetentionDep,
    SettingsDep,
    ThreadId,
    ThreadServiceDep,
    ThreadStateDep,
    ThreadStreamsDep,
    set_page_headers,
)
from runyard.api.sse import EventStream, sse_response
from runyard.auth.guards import require_thread
from runyard.auth.handlers import rewritten, sent_copy
from runyard.domain.errors import InvalidInputError
from runyard.schemas.threads import (
    STATE_SELECT,
    CheckpointConfig,
    StateField,
    Thread,
    ThreadCreate,
    ThreadFilter,
    ThreadHistorySearch,
    ThreadPatch,
    ThreadPrune,
    ThreadSearch,
    ThreadStateAtCheckpoint,
    ThreadStateUpdate,
    ThreadUpdateStateResponse,
)
from runyard.services import thread_streams
from runyard.services.threads import to_wire

router = APIRouter(tags=["Threads"])

THREAD_MODES = (
    "run_modes (every run event), lifecycle (run start and end), state_update; or run stream "
    f"modes ({', '.join(thread_streams.RUN_EVENT_MODES)}): each run's start and end and only "
    "those events. Repeated, or comma-separated."
)
_NAMES = "|".join((*thread_streams.THREAD_STREAM_MODES, *thread_streams.RUN_EVENT_MODES))
_MODE = rf"\s*({_NAMES})\s*"
THREAD_MODES_PATTERN = rf"^({_MODE}(,{_MODE})*)?$"
Subgraphs = Annotated[bool, Query(description="Include the state of subgraphs.")]
StateSelect = Annotated[list[StateField] | None, Query(description=STATE_SELECT)]
# Declared, not enforced by the schema: the parser's 422 names the modes there are.
ThreadStreamModes = Annotated[
    list[Annotated[str, WithJsonSchema({"type": "string", "pattern": THREAD_MODES_PATTERN})]]
    | None,
    Query(description=THREAD_MODES),
]


@router.post("/threads", response_model=Thread)
async def create_thread(
    service: ThreadServiceDep,
    caller: CallerDep,
    body: Annotated[ThreadCreate, Body()] = ThreadCreate(),
) -> dict[str, Any]:
    """Create a thread, optionally with state updates applied as supersteps."""
    value = {
        "thread_id": body.thread_id,
        "metadata": dict(body.metadata or {}),
        "if_exists": body.if_exists,
    }
    await caller.authorize("threads", "create", value)  # handlers may stamp metadata
    body = body.model_copy(update={"metadata": value["metadata"]})
    thread = await service.create_thread(body)
    if body.if_exists == "do_nothing":  # the existing thread may be someone else's
        await require_thread(service, caller, thread.thread_id, "read")
    return to_wire(thread)


@router.post("/threads/search", response_model=list[dict[str, Any]])
async def search_threads(
    service: ThreadServiceDep,
    caller: CallerDep,
    response: Response,
    body: Annotated[ThreadSearch, Body()] = ThreadSearch(),
) -> list[dict[str, Any]]:
    """List threads matching the filters, one page at a time."""
    auth_filter = await caller.authorize("threads", "search", body.model_dump(mode="json"))
    page, next_offset = await service.search_threads(body, auth_filter)
    set_page_headers(response, body.offset, len(page), next_offset)
    return page


@router.post("/threads/count", response_model=int)
async def count_threads(
    service: ThreadServiceDep,
    caller: CallerDep,
    body: Annotated[ThreadFilter, Body()] = ThreadFilter(),
) -> int:
    """Count threads matching the filters."""
    auth_filter = await caller.authorize("threads", "search", body.model_dump(mode="json"))
    return await service.count_threads(body, auth_filter)


@router.post("/threads/prune")
async def prune_threads(
    service: ThreadServiceDep, retention: RetentionDep, caller: CallerDep, body: ThreadPrune
) -> dict[str, int]:
    """Delete threads, or (`keep_latest`) drop all but their latest checkpoints."""
    ids = [str(thread_id) for thread_id in body.thread_ids]
    for thread_id in ids:
        await require_thread(service, caller, thread_id, "delete")
    return {"pruned_count": await retention.prune_threads(ids, body.strategy)}


@router.get("/threads/{thread_id}/storage", response_model=dict[str, Any])
async def get_thread_storage(
    service: ThreadServiceDep, caller: CallerDep, thread_id: ThreadId
) -> dict[str, Any]:
    """Bytes the thread's checkpoints occupy: checkpoints, channel values (by channel; inside
    the checkpoints on SQLite) and pending writes."""
    await require_thread(service, caller, str(thread_id), "read")
    return await service.thread_storage(str(thread_id))


@router.get("/threads/{thread_id}", response_model=None, responses={200: {"model": Thread}})
async def get_thread(
    service: ThreadServiceDep,
    caller: CallerDep,
    thread_id: ThreadId,
    include: Annotated[
        str | None,
        Query(description="Comma-separated extra fields: `ttl`.", pattern=r"^(ttl(,ttl)*)?$"),
    ] = None,
) -> dict[str, Any]:
    """Get a thread; `include=ttl` adds its time-to-live (when it has one)."""
    fields = {part.strip() for part in (include or "").split(",") if part.strip()}
    if fields - {"ttl"}:
        raise InvalidInputError(f"include supports only 'ttl', got {sorted(fields - {'ttl'})}")
    await require_thread(service, caller, str(thread_id), "read")
    return to_wire(await service.get_thread(str(thread_id)), include_ttl="ttl" in fields)


@router.patch("/threads/{thread_id}", response_model=Thread)
async def patch_thread(
    service: ThreadServiceDep,
    caller: CallerDep,
    thread_id: ThreadId,
    body: ThreadPatch,
    prefer: Annotated[str | None, Header()] = None,
) -> Any:
    """Merge metadata into a thread's; `Prefer: return=minimal` answers 204 without a body."""
    value = {"thread_id": str(thread_id), "metadata": dict(body.metadata)}
    sent = sent_copy(value)
    await require_thread(service, caller, str(thread_id), "update", value)
    body = rewritten(body, sent, value, ["metadata"])  # handlers may stamp metadata
    thread = await service.patch_thread(str(thread_id), body)
    if prefer == "return=minimal":
        return Response(status_code=204)
    return to_wire(thread)


@router.delete("/threads/{thread_id}", status_code=204)
async def delete_thread(
    service: ThreadServiceDep, caller: CallerDep, thread_id: ThreadId
) -> Response:
    """Delete a thread with its runs and checkpoints."""
    await require_thread(service, caller, str(thread_id), "delete")
    await service.delete_thread(str(thread_id))
    return Response(status_code=204)


@router.post("/threads/{thread_id}/copy", response_model=Thread)
async def copy_thread(
    service: ThreadServiceDep, caller: CallerDep, thread_id: ThreadId
) -> dict[str, Any]:
    """Copy a thread: same metadata and checkpoints under a new id."""
    await require_thread(service, caller, str(thread_id), "read")
    return to_wire(await service.copy_thread(str(thread_id)))


@router.get("/threads/{thread_id}/state", response_model=dict[str, Any])
async def get_state(
    service: ThreadServiceDep,
    state: ThreadStateDep,
    caller: CallerDep,
    thread_id: ThreadId,
    subgraphs: Subgraphs = False,
    select: StateSelect = None,
) -> dict[str, Any]:
    """The thread's latest state."""
    await require_thread(service, caller, str(thread_id), "read")
    return await state.get_state(str(thread_id), subgraphs=subgraphs, select=select)


@router.post("/threads/{thread_id}/state", response_model=ThreadUpdateStateResponse)
async def update_state(
    service: ThreadServiceDep,
    state: ThreadStateDep,
    caller: CallerDep,
    thread_id: ThreadId,
    body: ThreadStateUpdate,
) -> dict[str, Any]:
    """Write new state values as if `as_node` had produced them."""
    await require_thread(service, caller, str(thread_id), "update")
    return await state.update_state(
        str(thread_id),
        body.values,
        as_node=body.as_node,
        checkpoint=body.checkpoint,
        checkpoint_id=body.checkpoint_id,
    )


@router.post("/threads/{thread_id}/state/checkpoint", response_model=dict[str, Any])
async def get_state_at(
    service: ThreadServiceDep,
    state: ThreadStateDep,
    caller: CallerDep,
    thread_id: ThreadId,
    body: ThreadStateAtCheckpoint,
) -> dict[str, Any]:
    """The thread's state at the checkpoint given in the body."""
    await require_thread(service, caller, str(thread_id), "read")
    return await state.get_state(
        str(thread_id),
        checkpoint=body.checkpoint,
        subgraphs=body.subgraphs,
        select=body.select,
    )


@router.get("/threads/{thread_id}/state/{checkpoint_id}", response_model=dict[str, Any])
async def get_state_at_id(
    service: ThreadServiceDep,
    state: ThreadStateDep,
    caller: CallerDep,
    thread_id: ThreadId,
    checkpoint_id: str,
    subgraphs: Subgraphs = False,
    select: StateSelect = None,
) -> dict[str, Any]:
    """The thread's state at a checkpoint id."""
    await require_thread(service, caller, str(thread_id), "read")
    checkpoint = CheckpointConfig(checkpoint_id=checkpoint_id)
    return await state.get_state(
        str(thread_id), checkpoint=checkpoint, subgraphs=subgraphs, select=select
    )


@router.post("/threads/{thread_id}/history", response_model=list[dict[str, Any]])
async def search_history(
    service: ThreadServiceDep,
    state: ThreadStateDep,
    caller: CallerDep,
    thread_id: ThreadId,
    body: Annotated[ThreadHistorySearch, Body()] = ThreadHistorySearch(),
) -> list[dict[str, Any]]:
    """The thread's past states, newest first."""
    await require_thread(service, caller, str(thread_id), "read")
    return await state.get_history(
        str(thread_id),
        limit=body.limit,
        before=body.before,
        metadata=body.metadata,
        checkpoint=body.checkpoint,
        select=body.select,
    )


@router.get("/threads/{thread_id}/history", response_model=list[dict[str, Any]])
async def get_history(
    service: ThreadServiceDep,
    state: ThreadStateDep,
    caller: CallerDep,
    thread_id: ThreadId,
    limit: Annotated[int, Query(ge=1, le=1000, description="Number of states.")] = 10,
    before: Annotated[str | None, Query(description="A checkpoint id.")] = None,
    select: StateSelect = None,
) -> list[dict[str, Any]]:
    """The thread's past states, newest first."""
    await require_thread(service, caller, str(thread_id), "read")
    return await state.get_history(str(thread_id), limit=limit, before=before, select=select)


@router.get("/threads/{thread_id}/stream", response_class=EventStream)
async def join_thread_stream(
    threads: ThreadServiceDep,
    streams: ThreadStreamsDep,
    settings: SettingsDep,
    caller: CallerDep,
    thread_id: ThreadId,
    stream_mode: ThreadStreamModes = None,
    stream_modes: ThreadStreamModes = None,
    last_event_id: Annotated[str | None, Header(alias="Last-Event-ID")] = None,
) -> EventStream:
    """Every run of the thread in turn, runs created later included, until it is deleted."""
    await require_thread(threads, caller, str(thread_id), "read")
    modes = thread_streams.parse_thread_stream_modes([*(stream_mode or []), *(stream_modes or [])])
    events = await streams.open_thread_events(str(thread_id), last_event_id, modes)
    return sse_response(settings.stream_keepalive_seconds, events)
