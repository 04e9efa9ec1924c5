"""The services of an instance, each built from the few parts it reads."""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.store.base import BaseStore
from sqlalchemy.ext.asyncio import AsyncEngine

from runyard.db.engine import Sessions
from runyard.domain.retention import ThreadTTLPolicy
from runyard.domain.user_bounds import RunBounds, StoreBounds
from runyard.graphs.registry import GraphRegistry
from runyard.lifecycle.machine import RunLifecycle
from runyard.longterm_store.store import StoreOptions
from runyard.observability.metrics import Metrics
from runyard.observability.tracing import Tracing
from runyard.outbound.guard import WebhookGuard
from runyard.project.priority import PriorityAssigner
from runyard.queue.run_queue import RunQueue
from runyard.services.assistants import AssistantService
from runyard.services.console import ConsoleService
from runyard.services.crons import CronService
from runyard.services.health import HealthChecks, InstanceInfo, Probe
from runyard.services.metrics_report import MetricsReport
from runyard.services.new_runs import NewRuns
from runyard.services.retention import ThreadRetention
from runyard.services.run_arrivals import RunArrivals
from runyard.services.run_priority import RunPriorities
from runyard.services.run_waits import RunWaits
from runyard.services.runs import RunService
from runyard.services.session_commands import SessionCommands
from runyard.services.store import StoreService
from runyard.services.thread_session import ThreadSession
from runyard.services.thread_state import ThreadStateService
from runyard.services.thread_streams import ThreadStreams
from runyard.services.threads import ThreadService
from runyard.settings import Settings
from runyard.streaming.broker import EventBroker
from runyard.streaming.fanout import Fanouts

if TYPE_CHECKING:
    from runyard.encryption.at_rest import AtRest
    from runyard.encryption.custom import CustomEncryption


@dataclass(frozen=True)
class Services:
    """The use cases the routes and background loops call, built once per instance."""

    store: StoreService
    thread_state: ThreadStateService
    threads: ThreadService
    retention: ThreadRetention
    assistants: AssistantService
    crons: CronService
    runs: RunService
    waits: RunWaits
    thread_streams: ThreadStreams
    session: ThreadSession
    commands: SessionCommands
    health: HealthChecks
    metrics: MetricsReport
    info: InstanceInfo
    console: ConsoleService


@dataclass(frozen=True)
class Instance:
    """What only the instance knows of itself, read when asked: the background parts that
    died, whether it drains, its runs executing and its run slots (None before the
    workers start); and what services ask it to do: look at the crons again, own a short
    job."""

    dead_parts: Callable[[], list[str]]
    draining: Callable[[], bool]
    active: Callable[[], int]
    capacity: Callable[[], int | None]
    wake_crons: Callable[[], None]
    # Run a short job the instance owns (awaited at shutdown).
    spawn: Callable[[Coroutine[Any, Any, Any], str], None]


@dataclass(frozen=True)
class Storage:
    """The parts that hold data: the engine and its sessions, checkpoints, the store."""

    engine: AsyncEngine
    sessions: Sessions
    # Each statement commits on its own.
    autocommit: Sessions
    # A session for one db-layer call that must be atomic (one statement on PostgreSQL, a
    # transaction on SQLite).
    atomic: Callable[[], AbstractAsyncContextManager[Any]]
    checkpointer: BaseCheckpointSaver
    store: BaseStore
    store_options: StoreOptions


@dataclass(frozen=True)
class Streams:
    """What a thread's streams share: one look for its next run, one reader of its runs'
    events."""

    run_arrivals: RunArrivals
    fanouts: Fanouts[Any]


@dataclass(frozen=True)
class Project:
    """What the project declares: its graphs, thread retention, encryption, the webhook URL
    policy and run priorities."""

    graphs: GraphRegistry
    thread_ttl: ThreadTTLPolicy
    at_rest: AtRest | None
    encryption: CustomEncryption | None
    webhook_guard: WebhookGuard
    # `@priority.assign` of the project, None without one.
    priority: PriorityAssigner | None


def build_services(
    *,
    storage: Storage,
    project: Project,
    settings: Settings,
    lifecycle: RunLifecycle,
    broker: EventBroker,
    streams: Streams,
    probes: Sequence[Probe],
    queue: RunQueue,
    metrics: Metrics,
    tracing: Tracing,
    instance: Instance,
    info: InstanceInfo,
) -> Services:
    """Every service, from the parts the runtime started."""
    thread_state, threads = _threads(storage, project, lifecycle, broker)
    assistants = AssistantService(
        storage.sessions,
        storage.autocommit,
        project.graphs,
        storage.store,
        project.at_rest,
        project.encryption,
        threads,
    )
    runs = _runs(storage, project, settings, lifecycle, queue, assistants, tracing, info)
    waits = RunWaits(
        broker,
        storage.autocommit,
        runs,
        settings.stream_keepalive_seconds,
        instance.spawn,
        project.encryption,
    )
    thread_streams, session, commands = _streams(
        storage, project, settings, broker, streams, runs, waits
    )
    return Services(
        store=StoreService(storage.store, storage.store_options, store_bounds(settings)),
        thread_state=thread_state,
        threads=threads,
        retention=ThreadRetention(
            storage.autocommit, storage.atomic, storage.checkpointer, threads
        ),
        assistants=assistants,
        crons=_crons(storage, project, settings, assistants, instance),
        runs=runs,
        waits=waits,
        thread_streams=thread_streams,
        session=session,
        commands=commands,
        health=HealthChecks(storage.engine, probes, instance.dead_parts, instance.draining),
        metrics=MetricsReport(storage.sessions, metrics, queue, instance.active, instance.capacity),
        info=info,
        console=_console(storage, settings, info, runs),
    )


def _console(
    storage: Storage, settings: Settings, info: InstanceInfo, runs: RunService
) -> ConsoleService:
    # Liveness from advisory locks where instances hold them (PostgreSQL with Redis).
    locks = settings.resolved_database_url().startswith("postgresql") and bool(settings.redis_url)
    return ConsoleService(
        storage.autocommit, locks, settings.heartbeat_interval_seconds, info.instance_id, runs
    )


def store_bounds(settings: Settings) -> StoreBounds:
    """The bounds on a new store item RUNYARD_STORE_MAX_* set."""
    return StoreBounds(
        settings.store_max_key_chars,
        settings.store_max_label_chars,
        settings.store_max_namespace_labels,
    )


def _crons(
    storage: Storage,
    project: Project,
    settings: Settings,
    assistants: AssistantService,
    instance: Instance,
) -> CronService:
    return CronService(
        storage.sessions,
        storage.autocommit,
        assistants,
        project.webhook_guard,
        settings.cron_min_interval_seconds,
        settings.max_crons_per_user,
        project.at_rest,
        project.encryption,
        instance.wake_crons,
    )


def _runs(
    storage: Storage,
    project: Project,
    settings: Settings,
    lifecycle: RunLifecycle,
    queue: RunQueue,
    assistants: AssistantService,
    tracing: Tracing,
    info: InstanceInfo,
) -> RunService:
    new_runs = NewRuns(project.thread_ttl, tracing, info.langsmith_project, project.encryption)
    priorities = RunPriorities(project.priority, settings.fairness_key, storage.autocommit)
    return RunService(
        storage.autocommit,
        lifecycle,
        queue,
        project.webhook_guard,
        settings.heartbeat_interval_seconds,
        assistants,
        new_runs,
        priorities,
        project.encryption,
        RunBounds(settings.max_pending_runs_per_group, settings.max_batch_runs),
    )


def _threads(
    storage: Storage, project: Project, lifecycle: RunLifecycle, broker: EventBroker
) -> tuple[ThreadStateService, ThreadService]:
    thread_state = ThreadStateService(
        project.graphs,
        storage.store,
        storage.checkpointer,
        storage.sessions,
        storage.autocommit,
        lifecycle,
        broker,
        project.encryption,
    )
    threads = ThreadService(
        storage.sessions,
        storage.autocommit,
        lifecycle,
        storage.checkpointer,
        project.graphs,
        project.thread_ttl,
        project.at_rest,
        project.encryption,
        thread_state,
    )
    return thread_state, threads


def _streams(
    storage: Storage,
    project: Project,
    settings: Settings,
    broker: EventBroker,
    streams: Streams,
    runs: RunService,
    waits: RunWaits,
) -> tuple[ThreadStreams, ThreadSession, SessionCommands]:
    """The thread stream, the thread's streaming session and its commands."""
    session = ThreadSession(
        storage.autocommit,
        broker,
        streams.run_arrivals,
        runs,
        waits,
        settings.session_replay_events,
        project.encryption,
    )
    thread_streams = ThreadStreams(
        storage.autocommit, broker, streams.run_arrivals, streams.fanouts, waits
    )
    commands = SessionCommands(storage.autocommit, runs, waits, session, project.encryption)
    return thread_streams, session, commands
