"""Builds and owns every part of a Runyard instance; doubles as the app lifespan."""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import uuid
from collections.abc import Callable, Coroutine
from functools import partial
from typing import TYPE_CHECKING, Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.store.base import BaseStore
from sqlalchemy.ext.asyncio import AsyncEngine

from runyard.auth.handlers import load_auth
from runyard.background.cron_scheduler import CronScheduler
from runyard.background.liveness import InstanceLiveness
from runyard.background.reaper import Reaper
from runyard.background.thread_sweeper import ThreadTTLSweeper
from runyard.db.engine import Sessions
from runyard.domain.group_caps import caps_from
from runyard.domain.retention import ThreadTTLPolicy, parse_checkpointer
from runyard.graphs.registry import GraphRegistry
from runyard.lifecycle.machine import RunLifecycle
from runyard.longterm_store.store import StoreOptions, TtlSweeper
from runyard.loops import LoopGroup
from runyard.observability.langsmith import langsmith_project
from runyard.observability.metrics import Metrics
from runyard.observability.tracing import Tracing
from runyard.outbound.guard import WebhookGuard
from runyard.project.config import ProjectConfig, apply_environment
from runyard.project.config_env import load_project
from runyard.project.encryption_loading import load_encryption
from runyard.project.http_config import HttpConfig
from runyard.project.priority import PriorityAssigner
from runyard.project.ui_bundles import UiBundles, prepare_bundles
from runyard.queue.cancel_bus import CancelBus
from runyard.queue.run_queue import RunQueue
from runyard.sdk_handlers import AuthHandlers
from runyard.services.assistants import ensure_default_assistants
from runyard.services.catalog import Instance, Project, Services, Streams, build_services
from runyard.services.health import InstanceInfo
from runyard.services.run_arrivals import RunArrivals
from runyard.services.run_priority import require_trusted_fairness_key
from runyard.settings import Settings
from runyard.streaming.broker import EventBroker
from runyard.streaming.fanout import Fanouts
from runyard.wiring import workers as builders
from runyard.wiring.heap import settle_heap
from runyard.wiring.shutdown import (
    Phase,
    ShortJobs,
    ShutdownPhases,
    WorkerHandover,
    hand_over_workers,
    phase_bounds,
)
from runyard.wiring.storage import Storage, open_storage, services_storage
from runyard.wiring.transport import open_transport
from runyard.wiring.transport_contract import Transport, TransportNeeds
from runyard.wiring.webhooks import webhook_guard, webhook_sender
from runyard.worker.lease import LeaseKeeper
from runyard.worker.pool import WorkerPool
from runyard.worker.registry import RunningRuns
from runyard.worker.webhooks import WebhookSender

if TYPE_CHECKING:
    from runyard.encryption.at_rest import AtRest
    from runyard.encryption.custom import CustomEncryption

log = logging.getLogger("runyard.runtime")


class Runtime:
    """The one root of an instance: parts are started in named phases and stopped in named
    phases (runyard/wiring/shutdown.py)."""

    def __init__(self, settings: Settings, project: ProjectConfig | None = None) -> None:
        self.settings = settings
        self.instance_id = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.running = RunningRuns()
        self.metrics = Metrics(in_flight=lambda: len(self.running))
        self.tracing = Tracing.from_settings(settings, self.instance_id)
        self.langsmith_project = langsmith_project()
        self._shutdown = ShutdownPhases(phase_bounds(settings))
        self._handover: WorkerHandover | None = None
        # Each phase's loops, in the order they started (each stopped by a shutdown phase).
        self._loop_groups: list[LoopGroup] = []
        self.jobs = ShortJobs()
        self._given_project = project
        self.project: ProjectConfig
        # What `http` in langgraph.json asks (headers, webhooks); its routes are the app's.
        self.http: HttpConfig = project.http_config if project else HttpConfig()
        self.graphs: GraphRegistry
        self.auth: AuthHandlers | None = None
        self.priority: PriorityAssigner | None = None
        self.ui = UiBundles.empty()
        self.engine: AsyncEngine
        self.sessions: Sessions
        self.lease_sessions: Sessions
        # Each statement commits on its own (no BEGIN and COMMIT/ROLLBACK round trips).
        self.autocommit: Sessions
        self.checkpointer: BaseCheckpointSaver
        self.store: BaseStore
        self.at_rest: AtRest | None = None
        # `encryption.path` in the config: the project's own handlers (None: not set).
        self.encryption: CustomEncryption | None = None
        self.store_options: StoreOptions
        self._storage: Storage
        self.thread_ttl = ThreadTTLPolicy()
        self.cron_scheduler: CronScheduler | None = None
        self.broker: EventBroker
        self.queue: RunQueue
        self.cancel_bus: CancelBus
        self.webhooks: WebhookSender
        self.webhook_guard: WebhookGuard
        self.lifecycle: RunLifecycle
        self.workers: WorkerPool
        self.liveness: InstanceLiveness | None = None
        self.transport: Transport

    @property
    def dialect(self) -> str:
        """`postgresql` or `sqlite`."""
        return self.engine.dialect.name

    async def start(self) -> None:
        """Load the project, then start each phase in order; a failure stops what started.

        The phases: storage, transport, services, workers, background (each method below
        says what it starts). Each registers how its parts stop in the shutdown phases
        (runyard/wiring/shutdown.py), every loop before the connections it uses.
        """
        self._shutdown.add(Phase.CLOSE_STORE, self.tracing.shutdown)
        try:
            await self._load_project()
            for name, phase in self._phases():
                await phase()
                log.debug("runtime_phase_started phase=%s", name)
            settle_heap(self._shutdown.stack(Phase.CLOSE_STORE))
        except BaseException:
            # What started before the failure stops now: a failed start leaves nothing running.
            await self.stop()
            raise
        log.info(
            "runtime_started instance=%s database=%s queue=%s workers=%s crons=%s graphs=%s",
            self.instance_id,
            self.dialect,
            self.settings.queue_kind,
            self.settings.workers_here,
            "on" if self.settings.crons_enabled else "off (FF_CRONS_ENABLED=false)",
            ",".join(self.graphs.ids()),
        )

    def _phases(self) -> list[tuple[str, Callable[[], Coroutine[Any, Any, None]]]]:
        return [
            ("storage", self._start_storage),
            ("transport", self._start_transport),
            ("services", self._start_services),
            ("workers", self._start_workers),
            ("background", self._start_background),
        ]

    async def _load_project(self) -> None:
        """Read the project: graphs, auth, policies, UI bundles (nothing to stop)."""
        settings = self.settings
        if self._given_project is not None:
            self.project = self._given_project
        else:
            self.project = load_project(settings.config_path)
            self.http = self.project.http_config
        apply_environment(self.project)
        self.webhook_guard = webhook_guard(self.project, self.settings)
        self.thread_ttl = parse_checkpointer(self.project.checkpointer, str(self.project.path))
        self.graphs = GraphRegistry.load(self.project)
        self.auth = load_auth(self.project)
        require_trusted_fairness_key(settings.fairness_key, self.auth is not None)
        self.encryption = load_encryption(self.project)
        self.priority = PriorityAssigner.load(self.project)
        # Before the database: a UI that cannot be built stops the start-up at once.
        self.ui = await asyncio.to_thread(
            prepare_bundles, self.project, settings.resolved_ui_dir(), settings.ui_build
        )

    async def _start_storage(self) -> None:
        """Phase 1: engines and pools, the schema, the checkpointer and the store."""
        store = self._shutdown.stack(Phase.CLOSE_STORE)
        storage = await open_storage(
            self.settings, self.project, self.encryption, self.metrics, store
        )
        self._storage = storage
        self.at_rest, databases = storage.at_rest, storage.databases
        self.engine, self.sessions = databases.engine, databases.sessions
        self.lease_sessions, self.autocommit = databases.lease_sessions, databases.autocommit
        # One db-layer call that must be atomic (one statement on PostgreSQL).
        self.atomic = databases.atomic
        self.checkpointer, self.store = storage.checkpointer, storage.store
        self.store_options = storage.store_options
        # The streams that follow a thread's runs share one look for its next run.
        self.run_arrivals = RunArrivals(self.autocommit)
        store.push_async_callback(self.run_arrivals.stop)
        await ensure_default_assistants(self.sessions, self.graphs)

    async def _start_transport(self) -> None:
        """Phase 2: broker, queue and cancel bus (Redis or in-process), webhooks, lifecycle."""
        settings = self.settings
        caps = caps_from(
            settings.group_max_running,
            settings.group_max_starts_per_minute,
            settings.group_limit_overrides,
        )
        closing = self._shutdown.stack(Phase.CLOSE_TRANSPORT)
        groups = partial(self._loop_group, phase=Phase.CLOSE_TRANSPORT)
        needs = (settings, closing, groups, self.running.stop, self.sessions, self.instance_id)
        self.transport = transport = await open_transport(TransportNeeds(*needs, caps))
        self.broker = self.metrics.counting_subscribers(transport.broker)
        # A thread's live streams share one reader of its runs' events (stopped before it).
        self.thread_fanouts: Fanouts[Any] = Fanouts()
        closing.push_async_callback(self.thread_fanouts.stop)
        self.queue, self.cancel_bus = transport.queue, transport.cancel_bus
        self.webhooks = webhook_sender(
            settings,
            self.project,
            self.http,
            self.webhook_guard,
            self.metrics,
            self.autocommit,
            self.instance_id,
            self.encryption,
        )
        closing.push_async_callback(self.webhooks.stop)
        self.lifecycle = RunLifecycle(
            self.sessions,
            self.autocommit,
            self.dialect,
            self.broker,
            self.queue,
            self.cancel_bus,
            self.webhooks,
            self.metrics,
            self.checkpointer,
            caps=caps,
        )
        closing.push_async_callback(self.queue.close)

    async def _start_services(self) -> None:
        """The services, each built from the parts it reads (nothing of theirs to stop)."""
        self.services: Services = build_services(
            storage=services_storage(self._storage),
            project=Project(
                self.graphs,
                self.thread_ttl,
                self.at_rest,
                self.encryption,
                self.webhook_guard,
                self.priority,
            ),
            settings=self.settings,
            lifecycle=self.lifecycle,
            broker=self.broker,
            streams=Streams(self.run_arrivals, self.thread_fanouts),
            probes=self.transport.probes,
            queue=self.queue,
            metrics=self.metrics,
            tracing=self.tracing,
            instance=Instance(
                dead_parts=self.dead_parts,
                draining=lambda: self.draining,
                active=lambda: len(self.running),
                capacity=lambda: self.workers.capacity if self.workers_started else None,
                wake_crons=lambda: self.cron_scheduler.wake() if self.cron_scheduler else None,
                spawn=self.jobs.spawn,
            ),
            info=InstanceInfo(
                self.dialect,
                self.settings.queue_kind,
                self.instance_id,
                self.graphs.ids(),
                self.langsmith_project,
            ),
        )

    async def _start_workers(self) -> None:
        """Phase 3: liveness lock (a fleet), lease renewal, then the pool; at shutdown the
        pool stops claiming, drains and hands back before leases and liveness go."""
        if not self.transport.shared:
            await builders.recover_after_restart(self._reaper(), self.autocommit, self.queue)
        hand_back = self._shutdown.stack(Phase.HAND_BACK)
        groups = partial(self._loop_group, phase=Phase.HAND_BACK)
        self.liveness = live = await builders.hold_liveness(
            self.settings, self.instance_id, hand_back, groups, self.transport.shared
        )
        leases = groups("leases")
        keeper = LeaseKeeper(
            self.running, self.lease_sessions, self.instance_id, self.settings, self.metrics
        )
        leases.start("lease-keeper", keeper.run_forever)
        self.workers = WorkerPool(
            self.queue,
            builders.run_executor(
                self._storage,
                self.graphs,
                self.encryption,
                self.lifecycle,
                self.queue,
                self.broker,
                self.running,
                self.settings,
                self.instance_id,
                self.metrics,
                self.tracing,
            ),
            self.running,
            self.settings.workers_here,
            self.settings.n_jobs_per_worker,
            live,
        )
        # Registered after the leases: the pool hands back before their renewal stops.
        self._handover = hand_over_workers(
            self._shutdown, self.workers, self.running, self.settings, self.instance_id
        )
        self.workers.start()

    async def _start_background(self) -> None:
        """Phase 4: the loops above services (reaper, sweeps, crons, webhook outbox)."""
        # The runtime's short jobs are awaited once these loops have stopped.
        self._shutdown.add(Phase.STOP_INTAKE, self.jobs.wait)
        background = self._loop_group("background", phase=Phase.STOP_INTAKE)
        background.start("reaper", self._reaper().run_forever)
        if self.http.enabled("webhooks"):
            background.start("webhook-outbox", self.webhooks.run_forever)
        sweeper = TtlSweeper(self.store, self.store_options.sweep_interval_seconds)
        background.start("store-ttl-sweeper", sweeper.run_forever)
        sweep_threads = self.services.retention.sweep_expired_threads
        threads_sweeper = ThreadTTLSweeper(self.thread_ttl, sweep_threads)
        background.start("thread-ttl-sweeper", threads_sweeper.run_forever)
        db, runs = self._storage.databases, self.services.runs.create_run
        used, slots = (lambda: len(self.running)), (lambda: self.workers.capacity)
        await builders.record_instance(
            db, self.instance_id, self.settings, used, slots, lambda: self.draining,
            self.begin_drain, background,
        )  # fmt: skip
        self.cron_scheduler = builders.cron_scheduler(
            db, runs, self.instance_id, self.settings, self.encryption, background
        )
        kind = self.settings.queue_kind
        self.metrics.describe_instance(instance=self.instance_id, database=self.dialect, queue=kind)

    def _reaper(self) -> Reaper:
        return builders.reaper(
            self.lifecycle, self.queue, self.autocommit, self.settings, self.liveness
        )

    def _loop_group(self, name: str, grace: float = 5.0, *, phase: Phase) -> LoopGroup:
        """A group of loops stopped in `phase`, whose stop is registered now: before what
        was registered in that phase before it (the connections its loops use)."""
        group = LoopGroup(name, grace)
        self._loop_groups.append(group)
        self._shutdown.add(phase, group.stop)
        return group

    def dead_parts(self) -> list[str]:
        """Names of the background parts that stopped while they should run (for /livez)."""
        dead = [name for group in self._loop_groups for name in group.dead()]
        if self.workers_started and not self.workers.healthy():
            dead.append("worker-pool")
        return dead

    @property
    def workers_started(self) -> bool:
        """True once the worker pool runs (drain has something to stop)."""
        return hasattr(self, "workers")

    @property
    def draining(self) -> bool:
        """True once the worker pool's handover began (SIGTERM, or the stop)."""
        return self._handover is not None and self._handover.begun

    def begin_drain(self) -> None:
        """Stop claiming at once and start handing work over (SIGTERM); idempotent, and
        nothing to do before the workers started."""
        if self._handover is not None:
            self._handover.begin()

    async def stop(self) -> None:
        """Stop every part, in the named shutdown phases (runyard/wiring/shutdown.py).

        Idempotent, and safe before `start` or after a failed one: each phase holds only
        what was started, and nothing once it ran.
        """
        await self._shutdown.run()
