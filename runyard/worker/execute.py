"""The one execution path of a run: claim, execute the graph, publish events, finalize."""

from __future__ import annotations

import asyncio
import logging
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from langgraph.pregel import Pregel

from runyard.checkpoints.checkpointer import (
    fenced,
    riding_out_store_faults,
    storing_no_stopped_tasks,
)
from runyard.db.faults import store_unavailable
from runyard.domain.configurable import AUTH_USER_KEY
from runyard.domain.encryption_context import CONTEXT_KEY, use_context
from runyard.domain.errors import DecryptionError, StaleAttemptError
from runyard.domain.group_caps import HeldBack
from runyard.domain.run import ClaimedRun, RunRecord
from runyard.domain.run_request import RunRequest
from runyard.domain.status import RunStatus
from runyard.domain.tool_calls import use_book
from runyard.graphs.factories import GraphAccess
from runyard.graphs.serialize import dumps, to_jsonable
from runyard.graphs.streaming import FinalState, stream_graph
from runyard.observability.logs import run_log_context
from runyard.streaming.publisher import EventPublisher
from runyard.worker.attempt_endings import AttemptEndings, ended_without_state, until_store_answers
from runyard.worker.attempt_input import attempt_config, attempt_input
from runyard.worker.finalize import Outcome, RunFinalizer, ThreadSnapshot
from runyard.worker.registry import RunningRun, absorb_stop

if TYPE_CHECKING:
    from langgraph.checkpoint.base import BaseCheckpointSaver
    from langgraph.store.base import BaseStore

    from runyard.encryption.custom import CustomEncryption
    from runyard.graphs.registry import GraphRegistry
    from runyard.graphs.tool_calls import ToolCallRecords
    from runyard.lifecycle.machine import RunLifecycle
    from runyard.observability.metrics import Metrics
    from runyard.observability.tracing import Tracing
    from runyard.queue.run_queue import RunQueue
    from runyard.settings import Settings
    from runyard.streaming.broker import EventBroker
    from runyard.worker.registry import RunningRuns

log = logging.getLogger("runyard.worker")

# How long a run whose claim could not reach the database waits on the queue before it is
# popped again (here or elsewhere).
CLAIM_RETRY_SECONDS = 1.0


@dataclass(frozen=True)
class ExecutorParts:
    """What executing a run uses: the lifecycle and the run queue (claims, hand-backs),
    the broker (events), the registry of running runs, the graphs with their checkpointer
    and store, the records of at-most-once tool calls, the custom encryption (None when not
    set), the finalizer and observability."""

    instance_id: str
    settings: Settings
    lifecycle: RunLifecycle
    queue: RunQueue
    broker: EventBroker
    running: RunningRuns
    graphs: GraphRegistry
    checkpointer: BaseCheckpointSaver
    store: BaseStore
    tool_calls: ToolCallRecords
    encryption: CustomEncryption | None
    finalizer: RunFinalizer
    metrics: Metrics
    tracing: Tracing


class RunExecutor:
    """Executes claimed runs; every run in every mode goes through `execute`."""

    def __init__(self, parts: ExecutorParts) -> None:
        self._parts = parts
        self._endings = AttemptEndings(parts.lifecycle, parts.queue, parts.settings)

    async def execute(self, run_id: str) -> None:
        """Claim the run and, if this instance won it, execute and finalize it."""
        parts = self._parts
        claimed = await self._claim(run_id)
        if claimed is None:
            return
        run = claimed.run
        # Every log line of this run carries its identity; its span joins the creator's trace.
        with (
            run_log_context(run_id, run.thread_id, run.attempt, parts.instance_id),
            parts.tracing.run_span(run),
        ):
            # A first attempt on a thread without checkpoints has nothing to read back.
            await self._execute_and_finalize(run, run.attempt, claimed.thread_empty)

    async def _claim(self, run_id: str) -> ClaimedRun | None:
        """The claim; once it is decided, the queue is told (a capped group's next run may be
        popped), or, when a cap refused it, the run goes back to its group, held a while."""
        parts = self._parts
        try:
            with parts.metrics.claim_seconds.time():
                run = await parts.lifecycle.claim(
                    run_id, parts.instance_id, parts.settings.lease_duration_seconds
                )
        except DecryptionError as exc:
            await self._settle(run_id)
            # Claimed again it would fail again: at every push, or every lease expiry.
            log.warning("run_unreadable run_id=%s error=%s", run_id, exc.message)
            await parts.lifecycle.fail_unreadable(run_id, parts.instance_id, exc.message)
            return None
        except Exception as exc:
            await self._settle(run_id)
            if not store_unavailable(exc):
                raise
            # Not claimed here: back on the queue, a moment later, for an instance that
            # reaches the database (this one cut off from it would drop it until the sweeper
            # found it). Its priority is not known here: it goes back at the default one.
            log.warning("run_claim_failed run_id=%s reason=store_unavailable", run_id)
            await parts.queue.push(run_id, CLAIM_RETRY_SECONDS)
            return None
        if isinstance(run, HeldBack):
            # Back to its place in its group, which the queue skips for a while: workers do
            # not pop and bounce the group's backlog meanwhile.
            log.info(
                "run_held_back run_id=%s group=%s seconds=%.2f", run_id, run.group, run.seconds
            )
            await parts.queue.hold(run_id, run.group, run.priority, run.seconds)
            return None
        await self._settle(run_id)
        return run

    async def _settle(self, run_id: str) -> None:
        try:
            await self._parts.queue.settle(run_id)
        except Exception:
            # Only a hint: a probe's hold expires by itself.
            log.exception("queue_settle_failed run_id=%s", run_id)

    async def _execute_and_finalize(self, run: RunRecord, attempt: int, thread_empty: bool) -> None:
        """The one owner of the attempt, from its claim to its end.

        The attempt stays registered (so its lease is renewed) until its end is written
        or it was handed back; BG_JOB_TIMEOUT_SECS bounds all of it, the final write too.
        """
        parts = self._parts
        run_id = run.run_id
        task = asyncio.current_task()
        assert task is not None
        entry = parts.running.add(run_id, attempt, task, thread_empty=thread_empty)
        log.info("run_claimed run_id=%s thread_id=%s attempt=%s", run_id, run.thread_id, attempt)
        deadline = asyncio.get_running_loop().time() + parts.settings.bg_job_timeout_secs
        try:
            with parts.metrics.run_seconds.time():
                outcome = await self._execute_claimed(run, entry, deadline)
            if outcome is not None:
                # From here a stop no longer cancels the task: the outcome is known.
                entry.finalizing = True
                with parts.metrics.finalize_seconds.time(), parts.tracing.step_span("finalize"):
                    await self._finalize(run, attempt, outcome, deadline)
        finally:
            parts.running.remove(run_id, attempt)

    async def _finalize(
        self, run: RunRecord, attempt: int, outcome: Outcome, deadline: float
    ) -> None:
        """Write the known outcome, retrying while the store is unreachable (within a lease).

        The job timeout bounds this too (with at least one lease for it): a final write
        still going then ends the run `timeout`. An outcome the store refuses (text
        PostgreSQL cannot hold) ends the run `error` with the reason, rather than leaving
        it running.
        """
        parts = self._parts
        run_id = run.run_id
        lease = parts.settings.lease_duration_seconds
        limit = asyncio.timeout_at(max(deadline, asyncio.get_running_loop().time() + lease))
        try:
            async with limit:
                await self._write_end(run, attempt, outcome)
            return
        except Exception as exc:
            if isinstance(exc, TimeoutError) and limit.expired():
                job_limit = parts.settings.bg_job_timeout_secs
                fallback = ended_without_state(
                    RunStatus.TIMEOUT,
                    "TimeoutError",
                    f"the run exceeded BG_JOB_TIMEOUT_SECS ({job_limit:g} s) while its end "
                    "was written",
                )
            elif store_unavailable(exc):
                # The lease runs out and the reaper hands the run to another attempt, which
                # resumes from the last checkpoint.
                log.warning("run_finalize_abandoned run_id=%s attempt=%s", run_id, attempt)
                return
            else:
                log.warning(
                    "run_outcome_unstorable run_id=%s attempt=%s error=%s",
                    run_id,
                    attempt,
                    type(exc).__name__,
                    exc_info=True,
                )
                fallback = ended_without_state(
                    RunStatus.ERROR,
                    "UnstorableOutcome",
                    "the run ended but its result could not be stored "
                    f"({type(exc).__name__}: {str(exc)[:300]})",
                )
        try:
            async with asyncio.timeout(lease):
                await self._write_end(run, attempt, fallback)
        except Exception:
            # The lease runs out and the reaper recovers the run.
            log.warning(
                "run_finalize_abandoned run_id=%s attempt=%s", run_id, attempt, exc_info=True
            )

    async def _write_end(self, run: RunRecord, attempt: int, outcome: Outcome) -> None:
        """Write the outcome, again while the store is unreachable, for at most one lease."""
        parts = self._parts
        await until_store_answers(
            parts.settings,
            "finalize",
            run.run_id,
            lambda: parts.finalizer.finalize(run, attempt, outcome),
        )

    async def _begin_attempt(self, run_id: str, attempt: int) -> None:
        try:
            # The metadata event opens every attempt's events, in the same round trip.
            metadata = dumps({"run_id": run_id, "attempt": attempt})
            await self._parts.broker.begin_attempt(run_id, attempt, [("metadata", metadata)])
        except Exception:
            # Events of this attempt will still be fenced by the database writes.
            log.warning("begin_attempt_failed run_id=%s attempt=%s", run_id, attempt, exc_info=True)

    async def _execute_claimed(
        self, run: RunRecord, entry: RunningRun, deadline: float
    ) -> Outcome | None:
        events = EventPublisher(self._parts.broker, run.run_id, entry.attempt)
        outcome = await self._run_graph(run, entry, events, deadline)
        while True:
            try:
                # Every event is stored before the outcome is: a client that sees the run
                # finished and replays its stream gets all of it.
                await events.flush()
                return outcome
            except StaleAttemptError:
                log.warning(
                    "run_stood_down run_id=%s attempt=%s reason=stale", run.run_id, entry.attempt
                )
                return None
            except asyncio.CancelledError:
                # Until its end is written the attempt can be stopped: a stop landing here
                # ends it as one a moment earlier would have, then the events are stored.
                reason = absorb_stop(entry)
                if reason is None:
                    raise
                log.info(
                    "run_stopped_while_flushing run_id=%s attempt=%s reason=%s",
                    run.run_id,
                    entry.attempt,
                    reason,
                )
                if outcome is None:
                    return None
                if outcome.status != RunStatus.INTERRUPTED:
                    outcome = await self._endings.stopped(run, entry, reason, outcome.graph)

    async def _run_graph(
        self, run: RunRecord, entry: RunningRun, events: EventPublisher, deadline: float
    ) -> Outcome | None:
        parts = self._parts
        run_id = run.run_id
        attempt = entry.attempt
        # The checkpoints this run writes are encrypted under its creator's context.
        use_context(run.kwargs.get(CONTEXT_KEY) or {})
        # Its at-most-once tool calls are recorded, fenced by this attempt (runyard/tools/).
        use_book(parts.tool_calls.for_attempt(run_id, attempt, run.thread_id))
        graph: Pregel | None = None
        final = FinalState()
        limit = asyncio.timeout_at(deadline)
        try:
            # The job timeout covers the whole attempt: graph building and the resume read
            # as well as the stream. A factory that is a context manager is set up for this
            # run, torn down after it.
            async with limit, AsyncExitStack() as resources:
                await self._begin_attempt(run_id, attempt)
                # The graph reads the run's metadata (in its config), input, config, context
                # and command in plain text; the stored row goes on to the run's end.
                plain = await parts.encryption.open_run(run) if parts.encryption else run
                request = plain.request
                config = attempt_config(plain, parts.settings.default_recursion_limit)
                graph = await self._graph(request, config, entry, resources)
                graph_input = await attempt_input(self._parts.checkpointer, plain, config)
                await self._stream(graph, graph_input, config, request, final, events)
        except asyncio.CancelledError:
            reason = absorb_stop(entry)
            if reason is None:
                raise
            return await self._endings.stopped(run, entry, reason, graph)
        except StaleAttemptError:
            log.warning("run_stood_down run_id=%s attempt=%s reason=stale", run_id, attempt)
            return None
        except Exception as exc:
            timed_out = isinstance(exc, TimeoutError) and limit.expired()
            return await self._endings.failed(run, entry, exc, graph, timed_out)
        return Outcome(RunStatus.SUCCESS, graph=graph, snapshot=_clean_end(final))

    async def _stream(
        self,
        graph: Pregel,
        graph_input: Any,
        config: dict[str, Any],
        request: RunRequest,
        final: FinalState,
        events: EventPublisher,
    ) -> None:
        async for name, data in stream_graph(
            graph,
            graph_input,
            config,
            list(request.stream_mode),
            subgraphs=request.stream_subgraphs,
            context=request.context,
            interrupt_before=request.interrupt_before,
            interrupt_after=request.interrupt_after,
            durability=request.durability,
            final=final,
        ):
            await events.send(name, dumps(data))

    async def _graph(
        self,
        request: RunRequest,
        config: dict[str, Any],
        entry: RunningRun,
        resources: AsyncExitStack,
    ) -> Pregel:
        parts = self._parts
        run_id, attempt = entry.run_id, entry.attempt
        loaded = parts.graphs.get(request.graph_id)
        access = GraphAccess(
            access_context="threads.create_run",
            user=config["configurable"].get(AUTH_USER_KEY),
            store=parts.store,
            context=request.context or None,
        )
        graph = await resources.enter_async_context(loaded.open(config, access))

        saver = fenced(parts.checkpointer, run_id, attempt, empty=entry.thread_empty)
        saver = riding_out_store_faults(saver, parts.settings.lease_duration_seconds)
        saver = storing_no_stopped_tasks(saver)
        return graph.copy(update={"checkpointer": saver, "store": parts.store})


def _clean_end(final: FinalState) -> ThreadSnapshot | None:
    """The thread's state after a run that ended without interrupt, from its last values.

    None when the stream cannot tell (no values, or an interrupt): finalize reads the
    checkpoint instead.
    """
    if not final.seen or final.interrupted:
        return None
    return ThreadSnapshot(to_jsonable(final.values), {}, False)
