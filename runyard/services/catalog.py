"""The services of an instance, each built from the few parts it reads."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from langgraph.store.base import BaseStore
from sqlalchemy.ext.asyncio import AsyncEngine

from runyard.db.engine import Sessions
from runyard.graphs.store import StoreOptions
from runyard.observability.metrics import Metrics
from runyard.queue.run_queue import RunQueue
from runyard.services.health import HealthChecks, InstanceInfo
from runyard.services.metrics_report import MetricsReport
from runyard.services.store import StoreService


@dataclass(frozen=True)
class Services:
    """The use cases the routes and background loops call, built once per instance."""

    store: StoreService
    health: HealthChecks
    metrics: MetricsReport
    info: InstanceInfo


@dataclass(frozen=True)
class InstanceProbes:
    """What only the instance knows of itself, read when asked: the background parts that
    died, whether it drains, its runs executing and its run slots (None before the
    workers start)."""

    dead_parts: Callable[[], list[str]]
    draining: Callable[[], bool]
    active: Callable[[], int]
    capacity: Callable[[], int | None]


def build_services(
    *,
    engine: AsyncEngine,
    sessions: Sessions,
    redis: Any,
    queue: RunQueue,
    store: BaseStore,
    store_options: StoreOptions,
    metrics: Metrics,
    probes: InstanceProbes,
    info: InstanceInfo,
) -> Services:
    """Every service, from the parts the runtime started."""
    return Services(
        store=StoreService(store, store_options),
        health=HealthChecks(engine, redis, probes.dead_parts, probes.draining),
        metrics=MetricsReport(sessions, metrics, queue, probes.active, probes.capacity),
        info=info,
    )
