"""The JSON snapshot of GET /metrics?format=json, in LangGraph's server's shape."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from runyard.db.run_stats import queue_stats

if TYPE_CHECKING:
    from runyard.runtime import Runtime


async def metrics_snapshot(runtime: Runtime) -> dict[str, Any]:
    """`queue` (runs waiting and executing, deployment-wide), `api` (requests answered by
    this instance) and `workers` (this instance's run slots)."""
    async with runtime.sessions() as session:
        queue = await queue_stats(session)
    body: dict[str, Any] = {
        "queue": queue,
        "api": {"http_requests_total": runtime.metrics.http_request_counts()},
    }
    if runtime.workers_started:
        capacity = runtime.workers.capacity
        active = len(runtime.running)
        body["workers"] = {
            "max": capacity,
            "active": active,
            "available": max(0, capacity - active),
        }
    return body
