"""Prometheus metrics of one instance, in a registry owned by its runtime (none at import)."""

from __future__ import annotations

import asyncio
import logging
import math
import resource
import sys
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    Info,
    ProcessCollector,
    generate_latest,
)
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from runyard.domain.status import TERMINAL_RUN_STATUSES

if TYPE_CHECKING:
    from runyard.queue.run_queue import RunQueue
    from runyard.streaming.broker import CompletionWaiter, Ended, EventBroker, StreamEvent

log = logging.getLogger("runyard.metrics")

# Runs last from milliseconds (a trivial graph) to an hour (BG_JOB_TIMEOUT_SECS).
RUN_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600)
# Claims and finalizations are a handful of statements.
STEP_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5)
UNMATCHED_ROUTE = "unmatched"
QUEUE_DEPTH_TIMEOUT = 1.0
# Labels come from a closed set, so no client can grow the metrics without bound.
HTTP_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


class Metrics:
    """Every metric this instance exports at GET /metrics."""

    def __init__(self, in_flight: Callable[[], int]) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        registry = self.registry
        self.instance = Info(
            "runyard_instance", "This instance: id, version and backends.", registry=registry
        )
        self._add_run_metrics(in_flight)
        self._add_lease_and_delivery_metrics()
        self._add_process_metrics()

    def _add_run_metrics(self, in_flight: Callable[[], int]) -> None:
        """Runs and the queue: outcomes, depths, in flight, and the time of each step."""
        registry = self.registry
        self.runs_finished = Counter(
            "runyard_runs_finished",
            "Runs this instance's workers or reaper brought to a terminal status, by status.",
            ["status"],
            registry=registry,
        )
        for status in TERMINAL_RUN_STATUSES:
            self.runs_finished.labels(status.value)
        self.queue_depth = Gauge(
            "runyard_queue_depth",
            "Run ids waiting in the job queue (Redis list length, or in-process queue size).",
            registry=registry,
        )
        self.group_depth = Gauge(
            "runyard_queue_group_pending",
            "Pending runs of the fairness groups with the most (deployment-wide; the rest "
            "summed as group `other`).",
            ["group"],
            registry=registry,
        )
        self.group_oldest_wait = Gauge(
            "runyard_queue_group_oldest_wait_seconds",
            "How long the oldest pending run of each group shown has waited.",
            ["group"],
            registry=registry,
        )
        self.runs_in_flight = Gauge(
            "runyard_runs_in_flight", "Runs executing in this instance now.", registry=registry
        )
        self.runs_in_flight.set_function(in_flight)
        self.claim_seconds = Histogram(
            "runyard_run_claim_seconds",
            "Time to claim a run (the conditional UPDATE), won or lost.",
            buckets=STEP_BUCKETS,
            registry=registry,
        )
        self.run_seconds = Histogram(
            "runyard_run_execution_seconds",
            "Time a claimed run spent executing its graph, until it ended or was stopped.",
            buckets=RUN_BUCKETS,
            registry=registry,
        )
        self.finalize_seconds = Histogram(
            "runyard_run_finalize_seconds",
            "Time to finalize a run: status, thread state, last events, wake-ups.",
            buckets=STEP_BUCKETS,
            registry=registry,
        )

    def _add_lease_and_delivery_metrics(self) -> None:
        """Leases, the reaper, webhooks and the events followed here."""
        registry = self.registry
        self.lease_renewals = Counter(
            "runyard_lease_renewals",
            "Run leases renewed by this instance's heartbeats.",
            registry=registry,
        )
        self.lease_renewal_failures = Counter(
            "runyard_lease_renewal_failures",
            "Heartbeats whose lease renewal statement failed.",
            registry=registry,
        )
        self.runs_reaped = Counter(
            "runyard_runs_reaped",
            "Runs whose lease expired, recovered by this instance's reaper, by new status.",
            ["status"],
            registry=registry,
        )
        self.webhook_deliveries = Counter(
            "runyard_webhook_deliveries",
            "Webhook deliveries this instance ended, by outcome: delivered (a 2xx or 4xx "
            "answer), failed (retries used up, or a redirect), refused (the URL policy).",
            ["outcome"],
            registry=registry,
        )
        for outcome in ("delivered", "failed", "refused"):
            self.webhook_deliveries.labels(outcome)
        self.stream_subscribers = Gauge(
            "runyard_stream_subscribers",
            "Clients following a run's events here (SSE streams, /wait).",
            registry=registry,
        )
        self.stream_subscriptions = Counter(
            "runyard_stream_subscriptions",
            "Reads of a run's events opened here (a thread's live streams share one per run).",
            registry=registry,
        )

    def _add_process_metrics(self) -> None:
        """The process's statements, CPU and memory, and HTTP latency."""
        registry = self.registry
        self.db_statements = Counter(
            "runyard_db_statements",
            "SQL statements sent to the database: `runs` by Runyard's own queries, "
            "`checkpoints` by the PostgreSQL checkpointer (not counted on SQLite).",
            ["database"],
            registry=registry,
        )
        self.runs_statements = self.db_statements.labels("runs")
        self.checkpoint_statements = self.db_statements.labels("checkpoints")
        # CPU seconds, resident and virtual memory, open files (Linux /proc).
        ProcessCollector(registry=registry)
        self.peak_rss = Gauge(
            "runyard_process_peak_rss_bytes",
            "The largest resident set size this process has had.",
            registry=registry,
        )
        self.peak_rss.set_function(peak_rss_bytes)
        self.http_seconds = Histogram(
            "runyard_http_request_duration_seconds",
            "HTTP request latency until the response completes (a stream's whole length), "
            "by method, route template and status code.",
            ["method", "route", "status"],
            registry=registry,
        )

    def describe_instance(self, **fields: str) -> None:
        """Set the labels of `runyard_instance_info` (id, version, database, queue)."""
        self.instance.info(fields)

    async def render(
        self, queue: RunQueue | None, groups: Sequence[Mapping[str, Any]] = ()
    ) -> tuple[bytes, str]:
        """The exposition text, after sampling what can only be read asynchronously;
        `groups`: the fairness groups' pending runs and oldest waits, as read now."""
        # Only the groups shown now: a group whose runs all started disappears.
        self.group_depth.clear()
        self.group_oldest_wait.clear()
        for group in groups:
            self.group_depth.labels(group["group"]).set(group["n_pending"])
            if group["oldest_wait_secs"] is not None:
                self.group_oldest_wait.labels(group["group"]).set(group["oldest_wait_secs"])
        if queue is not None:
            try:
                # A scrape must answer even while Redis hangs.
                async with asyncio.timeout(QUEUE_DEPTH_TIMEOUT):
                    depth = await queue.depth()
                self.queue_depth.set(depth)
            except Exception as exc:
                # Redis down: say "unknown" rather than a stale number.
                self.queue_depth.set(math.nan)
                log.debug("queue_depth_unavailable error=%s", type(exc).__name__)
        return generate_latest(self.registry), CONTENT_TYPE_LATEST

    def http_request_counts(self) -> list[dict[str, Any]]:
        """Requests answered so far, by method, route template and status."""
        counts = []
        for metric in self.http_seconds.collect():
            for sample in metric.samples:
                if sample.name.endswith("_count"):
                    labels = sample.labels
                    counts.append(
                        {
                            "method": labels["method"],
                            "path": labels["route"],
                            "status": int(labels["status"]),
                            "count": int(sample.value),
                        }
                    )
        return counts

    def counting_subscribers(self, broker: EventBroker) -> EventBroker:
        """The broker, with its live subscriptions counted in `runyard_stream_subscribers`
        and every one opened in `runyard_stream_subscriptions_total`."""
        return SubscriberCountingBroker(broker, self.stream_subscribers, self.stream_subscriptions)


def peak_rss_bytes() -> float:
    """The process's peak resident set size (`ru_maxrss` is KiB on Linux, bytes on macOS)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return float(peak if sys.platform == "darwin" else peak * 1024)


class SubscriberCountingBroker:
    """An EventBroker that delegates everything and counts open subscriptions."""

    def __init__(self, inner: EventBroker, gauge: Gauge, opened: Counter) -> None:
        self.inner = inner
        self._gauge = gauge
        self._opened = opened

    async def begin_attempt(
        self, run_id: str, attempt: int, events: Sequence[tuple[str, str]] = ()
    ) -> None:
        """Delegate."""
        await self.inner.begin_attempt(run_id, attempt, events)

    async def publish(self, run_id: str, event: str, data: str, attempt: int | None = None) -> str:
        """Delegate."""
        return await self.inner.publish(run_id, event, data, attempt)

    async def publish_batch(
        self, run_id: str, events: Sequence[tuple[str, str]], attempt: int | None = None
    ) -> str:
        """Delegate."""
        return await self.inner.publish_batch(run_id, events, attempt)

    async def finish(
        self,
        run_id: str,
        attempt: int | None = None,
        last_events: Sequence[tuple[str, str]] = (),
        signal_done: bool = False,
    ) -> None:
        """Delegate."""
        await self.inner.finish(run_id, attempt, last_events, signal_done)

    async def subscribe(
        self,
        run_id: str,
        after: str | None = None,
        follow: bool = True,
        ended: Ended | None = None,
    ) -> AsyncIterator[StreamEvent]:
        """Delegate, counting the subscription while it is open."""
        self._opened.inc()
        self._gauge.inc()
        try:
            async for event in self.inner.subscribe(run_id, after, follow, ended):
                yield event
        finally:
            self._gauge.dec()

    async def forget(self, run_id: str) -> None:
        """Delegate."""
        await self.inner.forget(run_id)

    async def signal_done(self, run_id: str) -> None:
        """Delegate."""
        await self.inner.signal_done(run_id)

    def done_waiter(self, run_id: str) -> AbstractAsyncContextManager[CompletionWaiter]:
        """Delegate."""
        return self.inner.done_waiter(run_id)


class HttpMetricsMiddleware:
    """Observes each HTTP request's latency under its route template, not its raw path."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self._histogram = metrics.http_seconds

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Time the request until its response is complete (streams included)."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500

        async def send_wrapper(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, send_wrapper)
        finally:
            method = scope["method"] if scope["method"] in HTTP_METHODS else "other"
            self._histogram.labels(method, route_template(scope), str(status)).observe(
                time.perf_counter() - started
            )


def route_template(scope: Scope) -> str:
    """The matched route's path template (`/threads/{thread_id}`), or `unmatched`."""
    route: Any = scope.get("route")
    path = getattr(route, "path", None)
    return path if isinstance(path, str) else UNMATCHED_ROUTE
