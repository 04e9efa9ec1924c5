"""Cron routes of the Agent Protocol: scheduled runs on a thread or on new threads."""

from __future__ import annotations

import uuid
from typing import Annotated, Any, TypeVar

from fastapi import APIRouter, Body, Path, Response

from runyard.api.deps import (
    AssistantServiceDep,
    CallerDep,
    CronServiceDep,
    ThreadId,
    ThreadServiceDep,
    set_page_headers,
)
from runyard.auth.guards import require_assistant, require_cron, require_thread
from runyard.auth.handlers import Caller, rewritten, sent_copy
from runyard.auth.user import caller_configurable
from runyard.schemas.crons import (
    Cron,
    CronCount,
    CronCreate,
    CronPatch,
    CronSearch,
    ThreadCronCreate,
)
from runyard.services.assistants import AssistantService
from runyard.services.crons import to_wire
from runyard.services.threads import ThreadService

router = APIRouter(tags=["Crons"])

NewCron = TypeVar("NewCron", bound=ThreadCronCreate)


async def _authorize_new_cron(
    threads: ThreadService,
    assistants: AssistantService,
    caller: Caller,
    thread_id: str | None,
    body: NewCron,
) -> NewCron:
    """Run the create handler (it may stamp metadata); the caller must see thread and assistant."""
    if caller.auth is None:
        return body
    value = body.model_dump(mode="json")
    value["thread_id"] = thread_id
    value["metadata"] = dict(body.metadata or {})
    sent = sent_copy(value)
    await caller.authorize("crons", "create", value)
    if thread_id is not None:
        await require_thread(threads, caller, thread_id, "create_run")
    await require_assistant(assistants, caller, body.assistant_id, "read")
    return rewritten(body, sent, value, ["metadata"])  # handlers may stamp metadata


CronId = Annotated[uuid.UUID, Path(description="The cron's id (a UUID).")]


@router.post("/threads/{thread_id}/runs/crons", response_model=Cron)
async def create_thread_cron(
    thread_id: ThreadId,
    body: ThreadCronCreate,
    service: CronServiceDep,
    threads: ThreadServiceDep,
    assistants: AssistantServiceDep,
    caller: CallerDep,
) -> dict[str, Any]:
    """Schedule runs on an existing thread."""
    body = await _authorize_new_cron(threads, assistants, caller, str(thread_id), body)
    return to_wire(await service.create_cron(str(thread_id), body, caller_configurable(caller)))


@router.post("/runs/crons", response_model=Cron)
async def create_cron(
    body: CronCreate,
    service: CronServiceDep,
    threads: ThreadServiceDep,
    assistants: AssistantServiceDep,
    caller: CallerDep,
) -> dict[str, Any]:
    """Schedule stateless runs: each one gets a new thread (deleted after unless `keep`)."""
    body = await _authorize_new_cron(threads, assistants, caller, None, body)
    return to_wire(await service.create_cron(None, body, caller_configurable(caller)))


@router.post("/runs/crons/search", response_model=list[dict[str, Any]])
async def search_crons(
    service: CronServiceDep,
    caller: CallerDep,
    response: Response,
    body: Annotated[CronSearch, Body()] = CronSearch(),
) -> list[dict[str, Any]]:
    """List crons matching the filters, one page at a time."""
    auth_filter = await caller.authorize("crons", "search", body.model_dump(mode="json"))
    found = await service.search_crons(body, auth_filter)
    page = found.to_wire(body.select)
    set_page_headers(response, body.offset, len(page), found.next_offset)
    return page


@router.post("/runs/crons/count", response_model=int)
async def count_crons(
    service: CronServiceDep, caller: CallerDep, body: Annotated[CronCount, Body()] = CronCount()
) -> int:
    """Count crons matching the filters."""
    auth_filter = await caller.authorize("crons", "search", body.model_dump(mode="json"))
    return await service.count_crons(body, auth_filter)


@router.get("/runs/crons/{cron_id}", response_model=Cron)
async def get_cron(cron_id: CronId, service: CronServiceDep, caller: CallerDep) -> dict[str, Any]:
    """One cron."""
    await require_cron(service, caller, str(cron_id), "read")
    return to_wire(await service.get_cron(str(cron_id)))


@router.patch("/runs/crons/{cron_id}", response_model=Cron)
async def patch_cron(
    cron_id: CronId, body: CronPatch, service: CronServiceDep, caller: CallerDep
) -> dict[str, Any]:
    """Change a cron: schedule, timezone, end time, enabled, metadata or what its runs get."""
    # As LangGraph does, the value carries only what was sent (metadata included).
    value = {"cron_id": str(cron_id), **body.model_dump(mode="json", exclude_unset=True)}
    sent = sent_copy(value)
    await require_cron(service, caller, str(cron_id), "update", value)
    body = rewritten(body, sent, value, ["metadata"])  # handlers may stamp metadata
    return to_wire(await service.patch_cron(str(cron_id), body))


@router.delete("/runs/crons/{cron_id}", status_code=204)
async def delete_cron(cron_id: CronId, service: CronServiceDep, caller: CallerDep) -> Response:
    """Delete a cron (runs it created stay)."""
    await require_cron(service, caller, str(cron_id), "delete")
    await service.delete_cron(str(cron_id))
    return Response(status_code=204)
