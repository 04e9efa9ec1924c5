"""The parts of the workers and background phases: the run executor with its finalizer, the
instance's liveness lock (a fleet), the reaper, the cron scheduler, and the recovery of a
single-process instance's runs after a restart."""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING

from runyard.background.cron_scheduler import CreateRun, CronScheduler
from runyard.background.instance_record import InstanceRecord
from runyard.background.liveness import InstanceLiveness
from runyard.background.reaper import LivenessCheck, Reaper, ReaperSettings
from runyard.db import run_recovery as recovery_db
from runyard.db.engine import Sessions
from runyard.graphs.tool_calls import ToolCallRecords
from runyard.lifecycle.machine import RunLifecycle
from runyard.loops import LoopGroup
from runyard.queue.run_queue import RunQueue
from runyard.settings import Settings
from runyard.wiring.storage import Databases, Storage
from runyard.worker.execute import ExecutorParts, RunExecutor
from runyard.worker.finalize import RunFinalizer

if TYPE_CHECKING:
    from runyard.encryption.custom import CustomEncryption
    from runyard.graphs.registry import GraphRegistry
    from runyard.observability.metrics import Metrics
    from runyard.observability.tracing import Tracing
    from runyard.streaming.broker import EventBroker
    from runyard.worker.registry import RunningRuns

log = logging.getLogger("runyard.runtime")


def run_executor(
    storage: Storage,
    graphs: GraphRegistry,
    encryption: CustomEncryption | None,
    lifecycle: RunLifecycle,
    queue: RunQueue,
    broker: EventBroker,
    running: RunningRuns,
    settings: Settings,
    instance_id: str,
    metrics: Metrics,
    tracing: Tracing,
) -> RunExecutor:
    """The one execution path, with its finalizer, from the parts they use."""
    finalizer = RunFinalizer(
        lifecycle,
        storage.databases.autocommit,
        graphs,
        storage.checkpointer,
        storage.store,
        encryption,
    )
    parts = ExecutorParts(
        instance_id=instance_id,
        settings=settings,
        lifecycle=lifecycle,
        queue=queue,
        broker=broker,
        running=running,
        graphs=graphs,
        checkpointer=storage.checkpointer,
        store=storage.store,
        tool_calls=ToolCallRecords(
            storage.databases.autocommit,
            storage.checkpointer.serde,
            settings.max_tool_result_bytes,
            settings.lease_duration_seconds,
        ),
        encryption=encryption,
        finalizer=finalizer,
        metrics=metrics,
        tracing=tracing,
    )
    return RunExecutor(parts)


def reaper(
    lifecycle: RunLifecycle,
    queue: RunQueue,
    autocommit: Sessions,
    settings: Settings,
    liveness: InstanceLiveness | None = None,
) -> Reaper:
    """The reaper of expired leases, dead instances' runs (when this instance holds a
    liveness lock) and unqueued pending runs, with its settings."""
    check = None
    if liveness is not None:
        # Others have a lease, after a restart of the database, to take their lock back.
        check = LivenessCheck(liveness.instance_id, settings.lease_duration_seconds)
    return Reaper(
        lifecycle,
        queue,
        autocommit,
        ReaperSettings(
            interval_seconds=settings.reaper_interval_seconds,
            max_retries=settings.bg_job_max_retries,
            stuck_pending_seconds=settings.stuck_pending_threshold_seconds,
            liveness=check,
        ),
    )


def cron_scheduler(
    databases: Databases,
    create_run: CreateRun,
    instance_id: str,
    settings: Settings,
    encryption: CustomEncryption | None,
    background: LoopGroup,
) -> CronScheduler:
    """The cron scheduler, started in `background` unless FF_CRONS_ENABLED=false (this
    instance then fires none; it still answers the crons API and wakes no one)."""
    scheduler = CronScheduler(
        databases.sessions,
        databases.autocommit,
        create_run,
        instance_id,
        settings.cron_interval_seconds,
        encryption,
    )
    if settings.crons_enabled:
        background.start("cron-scheduler", scheduler.run_forever)
    return scheduler


async def hold_liveness(
    settings: Settings,
    instance_id: str,
    stack: AsyncExitStack,
    loop_group: Callable[[str], LoopGroup],
    shared: bool,
) -> InstanceLiveness | None:
    """In a fleet (PostgreSQL, and a transport the instances share): take this instance's
    liveness lock, check it every beat, and release it at shutdown after the worker pool
    stopped (pushed before it). None elsewhere: one process has no one to take its runs
    over."""
    url = settings.resolved_database_url()
    if not url.startswith("postgresql") or not shared:
        return None
    liveness = InstanceLiveness(
        "postgresql://" + url.split("://", 1)[1],
        instance_id,
        beat=settings.heartbeat_interval_seconds / 2,
        lease=settings.lease_duration_seconds,
    )
    await liveness.take()
    stack.push_async_callback(liveness.close)
    loop_group("liveness").start("instance-liveness", liveness.run_forever)
    return liveness


async def recover_after_restart(reaper: Reaper, autocommit: Sessions, queue: RunQueue) -> None:
    """Hand back the runs a previous process of a single-process instance left.

    One process owns every run in this mode, so anything still `running` belonged to a
    previous process that died: a lost attempt, back to the queue at once (or failed once
    BG_JOB_MAX_RETRIES attempts were lost); every pending run is queued again.
    """
    recovered = len(await reaper.recover_lost_attempts())
    async with autocommit() as session:
        pending = await recovery_db.pending_run_ids(session, limit=10_000)
    for place in pending:
        await queue.push(place.run_id, 0.0, place.priority, place.fairness_group)
    if recovered or pending:
        log.info("runs_recovered running=%s pending=%s", recovered, len(pending))


async def record_instance(
    databases: Databases,
    instance_id: str,
    settings: Settings,
    used: Callable[[], int],
    slots: Callable[[], int],
    draining: Callable[[], bool],
    drain: Callable[[], None],
    background: LoopGroup,
) -> InstanceRecord:
    """This instance's row for the console: written now, then every heartbeat in
    `background` (which also carries out a drain an operator asks), removed at stop."""
    record = InstanceRecord(
        databases.autocommit,
        instance_id,
        settings.heartbeat_interval_seconds,
        slots,
        used,
        draining,
        drain,
    )
    try:
        await record.write()
    except Exception:
        # The console's view only: never a reason not to start.
        log.exception("instance_record_failed")
    background.start("instance-record", record.run_forever)
    return record
