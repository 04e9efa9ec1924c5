"""One trace spans a run: the HTTP request, the queue hop and the graph's execution.

The app runs in this process (on the embedded store) so an in-memory exporter can collect
its spans; everything else is real: routes, database, queue, worker.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from runyard.app.factory import create_app
from runyard.settings import Settings
from tests.support.server import TEST_CONFIG

sdk = pytest.importorskip("opentelemetry.sdk.trace", reason="the `tracing` extra is not installed")
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)


@pytest.fixture
async def traced(tmp_path: Path) -> AsyncIterator[tuple[httpx.AsyncClient, InMemorySpanExporter]]:
    """An in-process app with tracing on, its spans kept in memory."""
    settings = Settings(
        DATABASE_URL="",
        REDIS_URL="",
        RUNYARD_DATA_DIR=tmp_path / "data",
        RUNYARD_CONFIG=TEST_CONFIG,
        RUNYARD_TRACING="console",
        RUNYARD_CRON_INTERVAL_SECONDS=60,
    )
    app = create_app(settings)
    exporter = InMemorySpanExporter()
    app.state.runtime.tracing.add_span_processor(SimpleSpanProcessor(exporter))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://runyard") as http:
            yield http, exporter


async def spans_when(exporter: InMemorySpanExporter, ready: Any, timeout: float = 10) -> list[Any]:
    """The finished spans once `ready(spans)` holds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        spans = list(exporter.get_finished_spans())
        if ready(spans):
            return spans
        await asyncio.sleep(0.05)
    pytest.fail(f"spans never complete: {[s.name for s in exporter.get_finished_spans()]}")


async def test_one_trace_from_request_through_queue_to_execution(
    traced: tuple[httpx.AsyncClient, InMemorySpanExporter],
) -> None:
    http, exporter = traced
    thread_id = (await http.post("/threads", json={})).json()["thread_id"]
    created = await http.post(
        f"/threads/{thread_id}/runs",
        json={"assistant_id": "pipeline", "input": {"text": "a"}},
    )
    assert created.status_code == 200
    run = created.json()
    assert run["kwargs"]["trace_context"]["traceparent"].startswith("00-")

    def complete(spans: list[Any]) -> bool:
        names = {span.name for span in spans}
        return "run pipeline" in names and "finalize" in names

    spans = await spans_when(exporter, complete)
    by_id = {span.context.span_id: span for span in spans}
    request = next(
        s for s in spans if s.name == "POST /threads/{thread_id}/runs" and s.parent is None
    )
    execution = next(s for s in spans if s.name == "run pipeline")
    finalize = next(s for s in spans if s.name == "finalize")

    assert execution.context.trace_id == request.context.trace_id
    assert execution.attributes["runyard.run_id"] == run["run_id"]
    assert execution.attributes["runyard.attempt"] == 1
    # The execution hangs off the request's span (the queue hop kept the context).
    parent = by_id.get(execution.parent.span_id)
    while parent is not None and parent is not request:
        parent = by_id.get(parent.parent.span_id) if parent.parent else None
    assert parent is request
    assert finalize.parent.span_id == execution.context.span_id
    # Probes are not traced: they would drown the traces that matter.
    await http.get("/livez")
    await http.get("/metrics")
    assert not any(s.name.startswith("GET /livez") for s in exporter.get_finished_spans())


async def test_runs_created_without_tracing_carry_no_trace_context(tmp_path: Path) -> None:
    settings = Settings(
        DATABASE_URL="",
        REDIS_URL="",
        RUNYARD_DATA_DIR=tmp_path / "data",
        RUNYARD_CONFIG=TEST_CONFIG,
        RUNYARD_CRON_INTERVAL_SECONDS=60,
    )
    app = create_app(settings)
    assert not app.state.runtime.tracing.enabled
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://runyard") as http:
            thread_id = (await http.post("/threads", json={})).json()["thread_id"]
            created = await http.post(
                f"/threads/{thread_id}/runs", json={"assistant_id": "pipeline", "input": {}}
            )
            joined = await http.get(f"/threads/{thread_id}/runs/{created.json()['run_id']}/join")
    assert created.status_code == joined.status_code == 200
    assert "trace_context" not in created.json()["kwargs"]
