"""The JSON snapshot of GET /metrics?format=json, in LangGraph's server's shape, and the
per-fairness-group queue figures of GET /metrics."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from runyard.db.run_stats import pending_by_group, queue_stats

if TYPE_CHECKING:
    from runyard.runtime import Runtime

# Fairness groups named in the metrics, most pending runs first; the rest are summed as
# `other`, so a deployment with many tenants keeps a bounded set of label values.
GROUPS_SHOWN = 10
GROUPS_TIMEOUT = 1.0

log = logging.getLogger("runyard.metrics")


async def metrics_snapshot(runtime: Runtime) -> dict[str, Any]:
    """`queue` (runs waiting and executing, deployment-wide), `api` (requests answered by
    this instance) and `workers` (this instance's run slots)."""
    async with runtime.sessions() as session:
        queue = await queue_stats(session)
        queue["groups"] = await waiting_groups(session, queue["n_pending"])
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


async def waiting_groups(session: Any, n_pending: int) -> list[dict[str, Any]]:
    """The GROUPS_SHOWN fairness groups with the most pending runs, then `other` (the rest
    together, its wait unknown) when there are more."""
    shown = await pending_by_group(session, GROUPS_SHOWN)
    rest = n_pending - sum(group["n_pending"] for group in shown)
    if rest > 0:
        shown.append({"group": "other", "n_pending": rest, "oldest_wait_secs": None})
    return shown


async def group_metrics(runtime: Runtime) -> list[dict[str, Any]]:
    """What the per-group queue gauges show (see `waiting_groups`); none while the database
    does not answer within GROUPS_TIMEOUT, so that a scrape still answers."""
    try:
        async with asyncio.timeout(GROUPS_TIMEOUT), runtime.sessions() as session:
            queue = await queue_stats(session)
            return await waiting_groups(session, queue["n_pending"])
    except Exception as exc:
        log.debug("queue_groups_unavailable error=%s", type(exc).__name__)
        return []
