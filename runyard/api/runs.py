"""Run routes: create (background, stream, wait), read, list, cancel, join, delete."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Body, Header, Query, Response
from fastapi.responses import JSONResponse, StreamingResponse

from runyard.api.deps import (
    CallerDep,
    RunConfigurableDep,
    RunId,
    RunServices,
    RunServicesDep,
    ThreadId,
)
from runyard.api.run_access import authorize_new_run, grant_new_run
from runyard.api.sse import EventStream, sse_response
from runyard.auth.guards import require_thread
from runyard.auth.handlers import Caller
from runyard.domain.errors import ForbiddenError, InvalidInputError
from runyard.domain.run import RunRecord
from runyard.domain.status import CancelAction
from runyard.domain.stream_modes import STREAM_MODES
from runyard.schemas.common import MAX_OFFSET, StopName
from runyard.schemas.runs import CancelMany, Run, RunCreate, RunField
from runyard.services.run_waits import LIVE_ONLY
from runyard.services.runs import to_wire
from runyard.streaming.broker import StreamEvent

router = APIRouter(tags=["Runs"])

IdempotencyKey = Annotated[str | None, Header(alias="Idempotency-Key", max_length=255)]


def _run_path(run: RunRecord) -> str:
    return f"/threads/{run.thread_id}/runs/{run.run_id}"


def _sse(svc: RunServices, events: AsyncIterator[StreamEvent], run: RunRecord) -> EventStream:
    return sse_response(
        svc.waits.keepalive_seconds,
        events,
        {"Location": _run_path(run) + "/stream", "Content-Location": _run_path(run)},
    )


async def _new_run(
    svc: RunServices,
    caller: Caller,
    thread_id: str | None,
    body: RunCreate,
    key: str | None,
    configurable: dict[str, Any],
    **options: Any,
) -> RunRecord:
    """Authorize, then create, a run on the thread or (None) on a temporary one; `options`
    go to the service's create_run (stream modes, a hook once it is committed)."""
    grant = await grant_new_run(svc.threads, svc.assistants, caller, thread_id, body, key)
    return await svc.runs.create_run(
        thread_id,
        body,
        idempotency_key=grant.idempotency_key,
        new_thread_metadata=grant.thread_metadata,
        configurable=configurable,
        **options,
    )


async def _create_new_run(
    svc: RunServices,
    caller: Caller,
    thread_id: str | None,
    body: RunCreate,
    key: str | None,
    configurable: dict[str, Any],
    response: Response,
) -> dict[str, Any]:
    """A background run: its record, and where it is."""
    run = await _new_run(svc, caller, thread_id, body, key, configurable)
    location = _run_path(run) if thread_id is not None else f"/runs/{run.run_id}"
    response.headers["Content-Location"] = location
    return to_wire(run)


async def _stream_new_run(
    svc: RunServices,
    caller: Caller,
    thread_id: str | None,
    body: RunCreate,
    key: str | None,
    configurable: dict[str, Any],
) -> EventStream:
    run = await _new_run(svc, caller, thread_id, body, key, configurable)
    events = svc.waits.run_events(
        run, after=None, modes=None, cancel_on_disconnect=body.on_disconnect == "cancel"
    )
    return _sse(svc, events, run)


async def _wait_new_run(
    svc: RunServices,
    caller: Caller,
    thread_id: str | None,
    body: RunCreate,
    key: str | None,
    configurable: dict[str, Any],
) -> StreamingResponse:
    modes = list(dict.fromkeys(["values", *body.stream_modes()]))
    watch = svc.waits.completion_watch()
    try:
        run = await _new_run(
            svc, caller, thread_id, body, key, configurable,
            stream_modes=modes, on_created=watch.register,
        )  # fmt: skip
    except BaseException:
        await watch.close()
        raise
    cancel = body.on_disconnect == "cancel"
    return _json_stream(svc.waits.wait_body(run, cancel, watch), run)


def _json_stream(body: AsyncIterator[bytes], run: RunRecord) -> StreamingResponse:
    """A JSON answer preceded by newline keep-alives, pointing at the run's join URL."""
    return StreamingResponse(body, media_type="application/json", headers=_join_headers(run))


def _join_headers(run: RunRecord) -> dict[str, str]:
    return {"Location": _run_path(run) + "/join", "Content-Location": _run_path(run)}


@router.post("/threads/{thread_id}/runs", response_model=Run)
async def create_run(
    thread_id: ThreadId,
    body: RunCreate,
    svc: RunServicesDep,
    caller: CallerDep,
    configurable: RunConfigurableDep,
    response: Response,
    key: IdempotencyKey = None,
) -> dict[str, Any]:
    """Create a background run on a thread."""
    return await _create_new_run(svc, caller, str(thread_id), body, key, configurable, response)


@router.post("/threads/{thread_id}/runs/stream", response_class=EventStream)
async def stream_run(
    thread_id: ThreadId,
    body: RunCreate,
    svc: RunServicesDep,
    caller: CallerDep,
    configurable: RunConfigurableDep,
    key: IdempotencyKey = None,
) -> EventStream:
    """Create a run on a thread and stream its events (SSE)."""
    return await _stream_new_run(svc, caller, str(thread_id), body, key, configurable)


@router.post("/threads/{thread_id}/runs/wait")
async def wait_run(
    thread_id: ThreadId,
    body: RunCreate,
    svc: RunServicesDep,
    caller: CallerDep,
    configurable: RunConfigurableDep,
    key: IdempotencyKey = None,
) -> StreamingResponse:
    """Create a run on a thread and return its final values."""
    return await _wait_new_run(svc, caller, str(thread_id), body, key, configurable)


@router.post("/runs", response_model=Run)
async def create_stateless_run(
    body: RunCreate,
    svc: RunServicesDep,
    caller: CallerDep,
    configurable: RunConfigurableDep,
    response: Response,
    key: IdempotencyKey = None,
) -> dict[str, Any]:
    """Create a background run on a temporary thread."""
    return await _create_new_run(svc, caller, None, body, key, configurable, response)


@router.post("/runs/batch", response_model=list[Run])
async def create_stateless_run_batch(
    body: Annotated[list[RunCreate], Body(min_length=1)],
    svc: RunServicesDep,
    caller: CallerDep,
    configurable: RunConfigurableDep,
) -> list[dict[str, Any]]:
    """Create one background run on a temporary thread per payload, all in one request
    (at most RUNYARD_MAX_BATCH_RUNS)."""
    svc.runs.check_batch_size(len(body))
    for payload in body:
        await authorize_new_run(svc.threads, svc.assistants, caller, None, payload)
    return [to_wire(run) for run in await svc.runs.create_batch(body, configurable)]


@router.post("/runs/stream", response_class=EventStream)
async def stream_stateless_run(
    body: RunCreate,
    svc: RunServicesDep,
    caller: CallerDep,
    configurable: RunConfigurableDep,
    key: IdempotencyKey = None,
) -> EventStream:
    """Create a run on a temporary thread and stream its events."""
    return await _stream_new_run(svc, caller, None, body, key, configurable)


@router.post("/runs/wait")
async def wait_stateless_run(
    body: RunCreate,
    svc: RunServicesDep,
    caller: CallerDep,
    configurable: RunConfigurableDep,
    key: IdempotencyKey = None,
) -> StreamingResponse:
    """Create a run on a temporary thread and return its final values."""
    return await _wait_new_run(svc, caller, None, body, key, configurable)


@router.post("/runs/cancel", status_code=204)
async def cancel_runs(
    body: CancelMany,
    svc: RunServicesDep,
    caller: CallerDep,
    action: StopName = CancelAction.INTERRUPT,
) -> Response:
    """Cancel several runs: by ids within a thread, or every run with a status."""
    if not body.run_ids and not body.status:
        raise InvalidInputError(
            "give run_ids (with thread_id) or status to choose the runs to cancel"
        )
    if body.thread_id is not None:
        await require_thread(svc.threads, caller, str(body.thread_id), "update")
    elif await caller.authorize("threads", "update", {"status": body.status}) is not None:
        raise ForbiddenError(
            "cancelling by status across threads is not available to filtered users; "
            "pass thread_id and run_ids"
        )
    await svc.runs.cancel_many(body.thread_id, body.run_ids, body.status, action)
    return Response(status_code=204)


@router.get("/threads/{thread_id}/runs", response_model=list[dict[str, Any]])
async def list_runs(
    thread_id: ThreadId,
    svc: RunServicesDep,
    caller: CallerDep,
    limit: Annotated[int, Query(ge=1, le=1000, description="Page size, 1 to 1000.")] = 10,
    offset: Annotated[
        int, Query(ge=0, le=MAX_OFFSET, description=f"Runs to skip, 0 to {MAX_OFFSET}.")
    ] = 0,
    status: Literal["pending", "running", "success", "error", "timeout", "interrupted"]
    | None = None,
    select: Annotated[list[RunField] | None, Query(description="Fields to return.")] = None,
) -> list[dict[str, Any]]:
    """A thread's runs, newest first (only the selected fields when `select` is given)."""
    await require_thread(svc.threads, caller, str(thread_id), "search")
    page = [to_wire(run) for run in await svc.runs.list_runs(str(thread_id), limit, offset, status)]
    if not select:
        return page
    return [{key: run[key] for key in dict.fromkeys(select)} for run in page]


@router.get("/threads/{thread_id}/runs/{run_id}", response_model=Run)
async def get_run(
    thread_id: ThreadId, run_id: RunId, svc: RunServicesDep, caller: CallerDep
) -> dict[str, Any]:
    """One run."""
    await require_thread(svc.threads, caller, str(thread_id), "read")
    return await svc.runs.run_wire(await svc.runs.get_run(str(thread_id), str(run_id)))


@router.delete("/threads/{thread_id}/runs/{run_id}", status_code=204)
async def delete_run(
    thread_id: ThreadId, run_id: RunId, svc: RunServicesDep, caller: CallerDep
) -> Response:
    """Delete a run (stopping it first if it executes)."""
    await require_thread(svc.threads, caller, str(thread_id), "delete")
    await svc.runs.delete_run(str(thread_id), str(run_id))
    return Response(status_code=204)


@router.post("/threads/{thread_id}/runs/{run_id}/cancel", response_model=None)
async def cancel_run(
    thread_id: ThreadId,
    run_id: RunId,
    svc: RunServicesDep,
    caller: CallerDep,
    wait: bool = False,
    action: StopName = CancelAction.INTERRUPT,
) -> Response | dict[str, Any]:
    """Cancel a run; with wait=true, answer only once it has stopped."""
    await require_thread(svc.threads, caller, str(thread_id), "update")
    receipt = await svc.runs.cancel_run(str(thread_id), str(run_id), action)
    if not wait:
        return JSONResponse(receipt, status_code=202)
    run = await svc.waits.wait_until_done_or_gone(str(run_id))
    return await svc.waits.result_body(run) if run else {}


@router.get("/threads/{thread_id}/runs/{run_id}/join")
async def join_run(
    thread_id: ThreadId, run_id: RunId, svc: RunServicesDep, caller: CallerDep
) -> Response:
    """Wait for a run to finish and return the thread's final values (or its error)."""
    await require_thread(svc.threads, caller, str(thread_id), "read")
    grace = svc.waits.keepalive_seconds
    run, waiting = await svc.waits.open_join(str(thread_id), str(run_id), grace)
    if waiting is None:
        # Nothing to wait for: a plain response, without a streaming body's machinery.
        body = json.dumps(await svc.waits.result_body(run), ensure_ascii=False)
        return Response(body, media_type="application/json", headers=_join_headers(run))
    return _json_stream(waiting, run)


@router.get("/threads/{thread_id}/runs/{run_id}/stream", response_class=EventStream)
async def join_run_stream(
    thread_id: ThreadId,
    run_id: RunId,
    svc: RunServicesDep,
    caller: CallerDep,
    stream_mode: Annotated[list[str] | None, Query()] = None,
    cancel_on_disconnect: bool = False,
    last_event_id: Annotated[str | None, Header(alias="Last-Event-ID")] = None,
) -> EventStream:
    """Join a run's event stream; Last-Event-ID replays exactly what was missed."""
    await require_thread(svc.threads, caller, str(thread_id), "read")
    run = await svc.runs.get_run(str(thread_id), str(run_id))
    after = last_event_id or LIVE_ONLY
    modes = parse_stream_modes(stream_mode)
    events = svc.waits.run_events(run, after, modes, cancel_on_disconnect)
    return _sse(svc, events, run)


def parse_stream_modes(raw: list[str] | None) -> list[str] | None:
    """Modes from repeated params, comma lists or a JSON array; None (all) when empty."""
    modes: list[str] = []
    for value in raw or []:
        value = value.strip()
        if value.startswith("["):
            try:
                parsed = json.loads(value)
            except ValueError:
                raise InvalidInputError(
                    f"stream_mode {value!r} is not a valid JSON array"
                ) from None
            modes.extend(str(item) for item in parsed)
        else:
            modes.extend(part.strip() for part in value.split(","))
    modes = [m for m in modes if m]
    unknown = [m for m in modes if m not in STREAM_MODES]
    if unknown:
        raise InvalidInputError(
            f"unknown stream_mode {unknown}; choose from {', '.join(STREAM_MODES)}"
        )
    return modes or None
