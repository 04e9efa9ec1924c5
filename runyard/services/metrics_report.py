"""The JSON snapshot of GET /metrics?format=json, in LangGraph's server's shape, and the
per-fairness-group queue figures of GET /metrics."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from runyard.db.engine import Sessions
from runyard.db.run_stats import pending_by_group, queue_stats
from runyard.observability.metrics import Metrics
from runyard.queue.run_queue import RunQueue

# Fairness groups named in the metrics, most pending runs first; the rest are summed as
# `other`, so a deployment with many tenants keeps a bounded set of label values.
GROUPS_SHOWN = 10
GROUPS_TIMEOUT = 1.0

log = logging.getLogger("runyard.metrics")


class MetricsReport:
    """This instance's metrics and the deployment's queue figures, as GET /metrics shows them."""

    def __init__(
        self,
        sessions: Sessions,
        metrics: Metrics,
        queue: RunQueue,
        active: Callable[[], int],
        capacity: Callable[[], int | None],
    ) -> None:
        self.sessions = sessions
        self.metrics = metrics
        self.queue = queue
        # Runs executing here now, and the run slots here (None before the workers start).
        self.active = active
        self.capacity = capacity

    async def snapshot(self) -> dict[str, Any]:
        """`queue` (runs waiting and executing, deployment-wide), `api` (requests answered by
        this instance) and `workers` (this instance's run slots)."""
        async with self.sessions() as session:
            queue = await queue_stats(session)
            queue["groups"] = await waiting_groups(session, queue["n_pending"])
        body: dict[str, Any] = {
            "queue": queue,
            "api": {"http_requests_total": self.metrics.http_request_counts()},
        }
        capacity = self.capacity()
        if capacity is not None:
            active = self.active()
            body["workers"] = {
                "max": capacity,
                "active": active,
                "available": max(0, capacity - active),
            }
        return body

    async def group_metrics(self) -> list[dict[str, Any]]:
        """What the per-group queue gauges show (see `waiting_groups`); none while the
        database does not answer within GROUPS_TIMEOUT, so that a scrape still answers."""
        try:
            async with asyncio.timeout(GROUPS_TIMEOUT), self.sessions() as session:
                queue = await queue_stats(session)
                return await waiting_groups(session, queue["n_pending"])
        except Exception as exc:
            log.debug("queue_groups_unavailable error=%s", type(exc).__name__)
            return []

    async def exposition(self) -> tuple[bytes, str]:
        """The Prometheus text of this instance, with the queue figures read now, and its
        content type."""
        return await self.metrics.render(self.queue, await self.group_metrics())


async def waiting_groups(session: Any, n_pending: int) -> list[dict[str, Any]]:
    """The GROUPS_SHOWN fairness groups with the most pending runs, then `other` (the rest
    together, its wait unknown) when there are more."""
    shown = await pending_by_group(session, GROUPS_SHOWN)
    rest = n_pending - sum(group["n_pending"] for group in shown)
    if rest > 0:
        shown.append({"group": "other", "n_pending": rest, "oldest_wait_secs": None})
    return shown
