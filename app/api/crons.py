"""Cron routes of the Agent Protocol: scheduled runs on a thread or on new threads."""

from __future__ import annotations

import uuid
from typing import Annotated, Any

from fastapi import APIRouter, Body, Path, Response

from app.api.deps import RuntimeDep, ThreadId
from app.schemas.crons import Cron, CronCount, CronCreate, CronPatch, CronSearch, ThreadCronCreate
from app.services import crons as service

router = APIRouter(tags=["Crons"])

CronId = Annotated[uuid.UUID, Path(description="The cron's id (a UUID).")]


@router.post("/threads/{thread_id}/runs/crons", response_model=Cron)
async def create_thread_cron(
    thread_id: ThreadId, body: ThreadCronCreate, runtime: RuntimeDep
) -> dict[str, Any]:
    """Schedule runs on an existing thread."""
    return await service.create_cron(runtime, str(thread_id), body)


@router.post("/runs/crons", response_model=Cron)
async def create_cron(body: CronCreate, runtime: RuntimeDep) -> dict[str, Any]:
    """Schedule stateless runs: each one gets a new thread (deleted after unless `keep`)."""
    return await service.create_cron(runtime, None, body)


@router.post("/runs/crons/search", response_model=list[dict[str, Any]])
async def search_crons(
    runtime: RuntimeDep,
    response: Response,
    body: Annotated[CronSearch, Body()] = CronSearch(),
) -> list[dict[str, Any]]:
    """List crons matching the filters, one page at a time."""
    page, next_offset = await service.search_crons(runtime, body)
    if next_offset is None:
        response.headers["X-Pagination-Total"] = str(body.offset + len(page))
    else:
        response.headers["X-Pagination-Total"] = str(next_offset + 1)
        response.headers["X-Pagination-Next"] = str(next_offset)
    return page


@router.post("/runs/crons/count", response_model=int)
async def count_crons(runtime: RuntimeDep, body: Annotated[CronCount, Body()] = CronCount()) -> int:
    """Count crons matching the filters."""
    return await service.count_crons(runtime, body)


@router.get("/runs/crons/{cron_id}", response_model=Cron)
async def get_cron(cron_id: CronId, runtime: RuntimeDep) -> dict[str, Any]:
    """One cron."""
    return await service.get_cron(runtime, str(cron_id))


@router.patch("/runs/crons/{cron_id}", response_model=Cron)
async def patch_cron(cron_id: CronId, body: CronPatch, runtime: RuntimeDep) -> dict[str, Any]:
    """Change a cron: schedule, timezone, end time, enabled, metadata or what its runs get."""
    return await service.patch_cron(runtime, str(cron_id), body)


@router.delete("/runs/crons/{cron_id}", status_code=204)
async def delete_cron(cron_id: CronId, runtime: RuntimeDep) -> Response:
    """Delete a cron (runs it created stay)."""
    await service.delete_cron(runtime, str(cron_id))
    return Response(status_code=204)
