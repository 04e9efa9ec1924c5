"""Run routes: create (background, stream, wait), read, list, cancel, join, delete."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Header, Query, Response
from fastapi.responses import StreamingResponse
from sse_starlette import EventSourceResponse, ServerSentEvent

from app.api.deps import RunId, RuntimeDep, ThreadId
from app.domain.errors import InvalidInputError
from app.domain.stream_modes import STREAM_MODES
from app.runtime import Runtime
from app.schemas.runs import CancelMany, Run, RunCreate
from app.services import run_waits, runs
from app.streaming.broker import StreamEvent

router = APIRouter(tags=["Runs"])

IdempotencyKey = Annotated[str | None, Header(alias="Idempotency-Key", max_length=255)]


def _run_path(run: dict[str, Any]) -> str:
    return f"/threads/{run['thread_id']}/runs/{run['run_id']}"


def _sse(
    runtime: Runtime, events: AsyncIterator[StreamEvent], run: dict[str, Any]
) -> EventSourceResponse:
    async def frames() -> AsyncIterator[ServerSentEvent]:
        async for item in events:
            yield ServerSentEvent(data=item.data, event=item.event, id=item.id)

    return EventSourceResponse(
        frames(),
        ping=runtime.settings.stream_keepalive_seconds,
        ping_message_factory=lambda: ServerSentEvent(comment="heartbeat"),
        headers={
            "Location": _run_path(run) + "/stream",
            "Content-Location": _run_path(run),
            "Cache-Control": "no-store",
            "X-Accel-Buffering": "no",
        },
    )


async def _stream_new_run(
    runtime: Runtime, thread_id: str | None, body: RunCreate, key: str | None
) -> EventSourceResponse:
    run = await runs.create_run(runtime, thread_id, body, idempotency_key=key)
    events = run_waits.run_events(
        runtime, run, after=None, modes=None, cancel_on_disconnect=body.on_disconnect == "cancel"
    )
    return _sse(runtime, events, run)


async def _wait_new_run(
    runtime: Runtime, thread_id: str | None, body: RunCreate, key: str | None
) -> StreamingResponse:
    modes = list(dict.fromkeys(["values", *body.stream_modes()]))
    run = await runs.create_run(runtime, thread_id, body, stream_modes=modes, idempotency_key=key)
    return _json_stream(run_waits.wait_body(runtime, run, body.on_disconnect == "cancel"), run)


def _json_stream(body: AsyncIterator[bytes], run: dict[str, Any]) -> StreamingResponse:
    """A JSON answer preceded by newline keep-alives, pointing at the run's join URL."""
    return StreamingResponse(
        body,
        media_type="application/json",
        headers={"Location": _run_path(run) + "/join", "Content-Location": _run_path(run)},
    )


@router.post("/threads/{thread_id}/runs", response_model=Run)
async def create_run(
    thread_id: ThreadId,
    body: RunCreate,
    runtime: RuntimeDep,
    response: Response,
    key: IdempotencyKey = None,
) -> dict[str, Any]:
    """Create a background run on a thread."""
    run = await runs.create_run(runtime, str(thread_id), body, idempotency_key=key)
    response.headers["Content-Location"] = _run_path(run)
    return run


@router.post("/threads/{thread_id}/runs/stream", response_class=EventSourceResponse)
async def stream_run(
    thread_id: ThreadId, body: RunCreate, runtime: RuntimeDep, key: IdempotencyKey = None
) -> EventSourceResponse:
    """Create a run on a thread and stream its events (SSE)."""
    return await _stream_new_run(runtime, str(thread_id), body, key)


@router.post("/threads/{thread_id}/runs/wait")
async def wait_run(
    thread_id: ThreadId, body: RunCreate, runtime: RuntimeDep, key: IdempotencyKey = None
) -> StreamingResponse:
    """Create a run on a thread and return its final values."""
    return await _wait_new_run(runtime, str(thread_id), body, key)


@router.post("/runs", response_model=Run)
async def create_stateless_run(
    body: RunCreate, runtime: RuntimeDep, response: Response, key: IdempotencyKey = None
) -> dict[str, Any]:
    """Create a background run on a temporary thread."""
    run = await runs.create_run(runtime, None, body, idempotency_key=key)
    response.headers["Content-Location"] = f"/runs/{run['run_id']}"
    return run


@router.post("/runs/stream", response_class=EventSourceResponse)
async def stream_stateless_run(
    body: RunCreate, runtime: RuntimeDep, key: IdempotencyKey = None
) -> EventSourceResponse:
    """Create a run on a temporary thread and stream its events."""
    return await _stream_new_run(runtime, None, body, key)


@router.post("/runs/wait")
async def wait_stateless_run(
    body: RunCreate, runtime: RuntimeDep, key: IdempotencyKey = None
) -> StreamingResponse:
    """Create a run on a temporary thread and return its final values."""
    return await _wait_new_run(runtime, None, body, key)


@router.post("/runs/cancel", status_code=204)
async def cancel_runs(
    body: CancelMany, runtime: RuntimeDep, action: Literal["interrupt", "rollback"] = "interrupt"
) -> Response:
    """Cancel several runs: by ids within a thread, or every run with a status."""
    if not body.run_ids and not body.status:
        raise InvalidInputError(
            "give run_ids (with thread_id) or status to choose the runs to cancel"
        )
    await runs.cancel_many(runtime, body.thread_id, body.run_ids, body.status, action)
    return Response(status_code=204)


@router.get("/threads/{thread_id}/runs", response_model=list[Run])
async def list_runs(
    thread_id: ThreadId,
    runtime: RuntimeDep,
    limit: Annotated[int, Query(ge=1, le=1000)] = 10,
    offset: Annotated[int, Query(ge=0)] = 0,
    status: Literal["pending", "running", "success", "error", "timeout", "interrupted"]
    | None = None,
) -> list[dict[str, Any]]:
    """A thread's runs, newest first."""
    return await runs.list_runs(runtime, str(thread_id), limit, offset, status)


@router.get("/threads/{thread_id}/runs/{run_id}", response_model=Run)
async def get_run(thread_id: ThreadId, run_id: RunId, runtime: RuntimeDep) -> dict[str, Any]:
    """One run."""
    return runs.to_wire(await runs.get_run(runtime, str(thread_id), str(run_id)))


@router.delete("/threads/{thread_id}/runs/{run_id}", status_code=204)
async def delete_run(thread_id: ThreadId, run_id: RunId, runtime: RuntimeDep) -> Response:
    """Delete a run (stopping it first if it executes)."""
    await runs.delete_run(runtime, str(thread_id), str(run_id))
    return Response(status_code=204)


@router.post("/threads/{thread_id}/runs/{run_id}/cancel", response_model=None)
async def cancel_run(
    thread_id: ThreadId,
    run_id: RunId,
    runtime: RuntimeDep,
    wait: bool = False,
    action: Literal["interrupt", "rollback"] = "interrupt",
) -> Response | dict[str, Any]:
    """Cancel a run; with wait=true, answer only once it has stopped."""
    await runs.cancel_run(runtime, str(thread_id), str(run_id), action)
    if not wait:
        return Response(status_code=202)
    run = await run_waits.wait_until_done_or_gone(runtime, str(run_id))
    return await run_waits.result_body(runtime, run) if run else {}


@router.get("/threads/{thread_id}/runs/{run_id}/join")
async def join_run(thread_id: ThreadId, run_id: RunId, runtime: RuntimeDep) -> StreamingResponse:
    """Wait for a run to finish and return the thread's final values (or its error)."""
    run = await runs.get_run(runtime, str(thread_id), str(run_id))
    return _json_stream(run_waits.join_body(runtime, run), run)


@router.get("/threads/{thread_id}/runs/{run_id}/stream", response_class=EventSourceResponse)
async def join_run_stream(
    thread_id: ThreadId,
    run_id: RunId,
    runtime: RuntimeDep,
    stream_mode: Annotated[list[str] | None, Query()] = None,
    cancel_on_disconnect: bool = False,
    last_event_id: Annotated[str | None, Header(alias="Last-Event-ID")] = None,
) -> EventSourceResponse:
    """Join a run's event stream; Last-Event-ID replays exactly what was missed."""
    run = await runs.get_run(runtime, str(thread_id), str(run_id))
    after = last_event_id or run_waits.LIVE_ONLY
    modes = parse_stream_modes(stream_mode)
    events = run_waits.run_events(runtime, run, after, modes, cancel_on_disconnect)
    return _sse(runtime, events, run)


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
