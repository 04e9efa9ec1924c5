"""The console's JSON API (/console/api): the views the page shows, each also on its own
for scripts, the live stream of snapshots, and the operator's actions. Every route needs an
operator (runyard/console/access.py)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import APIRouter, Depends, Path, Query, Request
from fastapi.responses import StreamingResponse

from runyard.console.access import Operator
from runyard.schemas import console as wire
from runyard.services.console import SNAPSHOT_SECONDS, ConsoleService

router = APIRouter(prefix="/console/api", tags=["Console"])
# A comment line keeps proxies from closing a quiet stream.
KEEPALIVE_SECONDS = 15.0


async def get_console(request: Request) -> ConsoleService:
    """The console's service of this instance."""
    service: ConsoleService = request.app.state.services.console
    return service


ConsoleDep = Annotated[ConsoleService, Depends(get_console)]
RunId = Annotated[str, Path(max_length=64)]


@router.get("/snapshot", response_model=wire.Snapshot)
async def snapshot(console: ConsoleDep, who: Operator) -> wire.Snapshot:
    """Everything the console shows, as this instance last saw it (at most ~1.5 s old)."""
    return await console.snapshot()


@router.get("/fleet", response_model=list[wire.FleetInstance])
async def fleet(console: ConsoleDep, who: Operator) -> list[wire.FleetInstance]:
    """The instances: host, version, start, heartbeat, slots, draining, alive or dead."""
    return (await console.snapshot()).fleet


@router.get("/queue", response_model=wire.Queue)
async def queue(console: ConsoleDep, who: Operator) -> wire.Queue:
    """Pending runs per fairness group and priority, the oldest wait, held-back runs."""
    return (await console.snapshot()).queue


@router.get("/runs", response_model=list[wire.ConsoleRun])
async def runs(
    console: ConsoleDep,
    who: Operator,
    failed: Annotated[bool, Query(description="recent failures instead")] = False,
) -> list[wire.ConsoleRun]:
    """Running runs (owner, attempt, lease expiry, thread), or with `?failed=true` the
    recent failures with their error."""
    current = await console.snapshot()
    return current.failures if failed else current.running


@router.get("/runs/search", response_model=wire.RunSearch)
async def search(
    console: ConsoleDep,
    who: Operator,
    q: Annotated[
        str, Query(min_length=1, max_length=64, description="a run, thread or assistant id")
    ],
) -> wire.RunSearch:
    """Runs whose run, thread or assistant id is `q`, the latest first."""
    return await console.search(q.strip())


@router.get("/crons", response_model=list[wire.NextFiring])
async def crons(console: ConsoleDep, who: Operator) -> list[wire.NextFiring]:
    """Enabled crons by their next firing."""
    return (await console.snapshot()).crons


@router.get("/webhooks", response_model=list[wire.Delivery])
async def webhooks(console: ConsoleDep, who: Operator) -> list[wire.Delivery]:
    """Webhook deliveries pending or failed, with attempts and the last answer."""
    return (await console.snapshot()).webhooks


@router.get("/charts", response_model=wire.Charts)
async def charts(console: ConsoleDep, who: Operator) -> wire.Charts:
    """Runs started and finished per minute and p50/p95 durations over the last hour, in
    all, per instance and per fairness group."""
    return (await console.snapshot()).charts


@router.get(
    "/live",
    response_class=StreamingResponse,
    responses={200: {"content": {"text/event-stream": {}}, "description": "snapshot events"}},
)
async def live(console: ConsoleDep, who: Operator) -> StreamingResponse:
    """Server-sent events: `snapshot` (the JSON of /console/api/snapshot) whenever a new
    one is made, about every 1.5 s; every open console shares the same snapshots."""
    return StreamingResponse(
        _snapshots(console),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )


async def _snapshots(console: ConsoleService) -> AsyncIterator[str]:
    sent: str | None = None
    quiet = 0.0
    while True:
        text = await console.snapshot_json()
        if text is not sent:
            sent, quiet = text, 0.0
            yield f"event: snapshot\r\ndata: {text}\r\n\r\n"
        elif quiet >= KEEPALIVE_SECONDS:
            quiet = 0.0
            yield ": keep-alive\r\n\r\n"
        await asyncio.sleep(SNAPSHOT_SECONDS)
        quiet += SNAPSHOT_SECONDS


@router.post("/runs/{run_id}/cancel", response_model=wire.ActionResult)
async def cancel_run(
    run_id: RunId, console: ConsoleDep, who: Operator, body: wire.CancelBody | None = None
) -> wire.ActionResult:
    """Cancel a run wherever it executes (the same path as the runs API's cancel)."""
    action = body.action if body is not None else "interrupt"
    return await console.cancel(run_id, action, who)


@router.post("/webhooks/{delivery_id}/retry", response_model=wire.ActionResult)
async def retry_delivery(
    delivery_id: Annotated[str, Path(max_length=128)], console: ConsoleDep, who: Operator
) -> wire.ActionResult:
    """Attempt a failed webhook delivery again, with a fresh set of attempts."""
    return await console.retry_delivery(delivery_id, who)


@router.post("/instances/{instance_id}/drain", response_model=wire.ActionResult)
async def drain(
    instance_id: Annotated[str, Path(max_length=128)], console: ConsoleDep, who: Operator
) -> wire.ActionResult:
    """Drain an instance (any of the fleet): at its next heartbeat it stops claiming and
    finishes or hands back its runs, as on SIGTERM."""
    return await console.drain(instance_id, who)
