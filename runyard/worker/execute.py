"""The one execution path of a run: claim, execute the graph, publish events, finalize."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING, Any, TypeVar

from langgraph.pregel import Pregel

from runyard.db import run_claims as claims_db
from runyard.db.faults import retry_while_store_unavailable, store_fault, store_unavailable
from runyard.domain.configurable import AUTH_USER_KEY
from runyard.domain.encryption_context import CONTEXT_KEY, use_context
from runyard.domain.errors import DecryptionError, StaleAttemptError
from runyard.domain.group_caps import HeldBack
from runyard.domain.status import RunStatus
from runyard.graphs.checkpointer import (
    fenced,
    riding_out_store_faults,
    storing_no_stopped_tasks,
)
from runyard.graphs.factories import GraphAccess
from runyard.graphs.serialize import dumps, to_jsonable
from runyard.graphs.streaming import FinalState, stream_graph
from runyard.observability.logs import run_log_context
from runyard.services.encrypted_json import opened_run
from runyard.streaming.publisher import EventPublisher
from runyard.worker.attempt_input import attempt_config, attempt_input
from runyard.worker.finalize import Outcome, ThreadSnapshot, cancelled, finalize_run
from runyard.worker.registry import RunningRun, absorb_stop, carry_through_stops

if TYPE_CHECKING:
    from runyard.runtime import Runtime

log = logging.getLogger("runyard.worker")
T = TypeVar("T")


class RunExecutor:
    """Executes claimed runs; every run in every mode goes through `execute`."""

    def __init__(self, runtime: Runtime) -> None:
        self._rt = runtime

    async def execute(self, run_id: str) -> None:
        """Claim the run and, if this instance won it, execute and finalize it."""
        rt = self._rt
        run = await self._claim(run_id)
        if run is None:
            return
        attempt = int(run["attempt"])
        claimed = dict(run)
        # A first attempt on a thread without checkpoints has nothing to read back.
        thread_empty = claimed.pop(claims_db.THREAD_HAS_CHECKPOINT, None) is False and attempt == 1
        # Every log line of this run carries its identity; its span joins the creator's trace.
        with (
            run_log_context(run_id, run["thread_id"], attempt, rt.instance_id),
            rt.tracing.run_span(claimed),
        ):
            await self._execute_and_finalize(claimed, attempt, thread_empty)

    async def _claim(self, run_id: str) -> dict[str, Any] | None:
        """The claim; once it is decided, the queue is told (a capped group's next run may be
        popped), or, when a cap refused it, the run goes back to its group, held a while."""
        rt = self._rt
        try:
            with rt.metrics.claim_seconds.time():
                run = await rt.lifecycle.claim(
                    run_id, rt.instance_id, rt.settings.lease_duration_seconds
                )
        except DecryptionError as exc:
            await self._settle(run_id)
            # Claimed again it would fail again: at every push, or every lease expiry.
            log.warning("run_unreadable run_id=%s error=%s", run_id, exc.message)
            await rt.lifecycle.fail_unreadable(run_id, rt.instance_id, exc.message)
            return None
        except Exception:
            await self._settle(run_id)
            raise
        if isinstance(run, HeldBack):
            # Back to its place in its group, which the queue skips for a while: workers do
            # not pop and bounce the group's backlog meanwhile.
            log.info(
                "run_held_back run_id=%s group=%s seconds=%.2f", run_id, run.group, run.seconds
            )
            await rt.queue.hold(run_id, run.group, run.priority, run.seconds)
            return None
        await self._settle(run_id)
        return run

    async def _settle(self, run_id: str) -> None:
        try:
            await self._rt.queue.settle(run_id)
        except Exception:
            # Only a hint: a probe's hold expires by itself.
            log.exception("queue_settle_failed run_id=%s", run_id)

    async def _execute_and_finalize(
        self, run: dict[str, Any], attempt: int, thread_empty: bool
    ) -> None:
        """The one owner of the attempt, from its claim to its end.

        The attempt stays registered (so its lease is renewed) until its end is written
        or it was handed back; BG_JOB_TIMEOUT_SECS bounds all of it, the final write too.
        """
        rt = self._rt
        run_id = run["run_id"]
        task = asyncio.current_task()
        assert task is not None
        entry = rt.running.add(run_id, attempt, task, thread_empty=thread_empty)
        log.info("run_claimed run_id=%s thread_id=%s attempt=%s", run_id, run["thread_id"], attempt)
        deadline = asyncio.get_running_loop().time() + rt.settings.bg_job_timeout_secs
        try:
            with rt.metrics.run_seconds.time():
                outcome = await self._execute_claimed(dict(run), entry, deadline)
            if outcome is not None:
                # From here a stop no longer cancels the task: the outcome is known.
                entry.finalizing = True
                with rt.metrics.finalize_seconds.time(), rt.tracing.step_span("finalize"):
                    await self._finalize(run, attempt, outcome, deadline)
        finally:
            rt.running.remove(run_id, attempt)

    async def _finalize(
        self, run: dict[str, Any], attempt: int, outcome: Outcome, deadline: float
    ) -> None:
        """Write the known outcome, retrying while the store is unreachable (within a lease).

        The job timeout bounds this too (with at least one lease for it): a final write
        still going then ends the run `timeout`. An outcome the store refuses (text
        PostgreSQL cannot hold) ends the run `error` with the reason, rather than leaving
        it running.
        """
        rt = self._rt
        run_id = run["run_id"]
        lease = rt.settings.lease_duration_seconds
        limit = asyncio.timeout_at(max(deadline, asyncio.get_running_loop().time() + lease))
        try:
            async with limit:
                await self._until_store_answers(
                    "finalize", run_id, lambda: finalize_run(rt, dict(run), attempt, outcome)
                )
            return
        except Exception as exc:
            if isinstance(exc, TimeoutError) and limit.expired():
                job_limit = rt.settings.bg_job_timeout_secs
                fallback = _ended_without_state(
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
                fallback = _ended_without_state(
                    RunStatus.ERROR,
                    "UnstorableOutcome",
                    "the run ended but its result could not be stored "
                    f"({type(exc).__name__}: {str(exc)[:300]})",
                )
        try:
            async with asyncio.timeout(lease):
                await self._until_store_answers(
                    "finalize", run_id, lambda: finalize_run(rt, dict(run), attempt, fallback)
                )
        except Exception:
            # The lease runs out and the reaper recovers the run.
            log.warning(
                "run_finalize_abandoned run_id=%s attempt=%s", run_id, attempt, exc_info=True
            )

    async def _until_store_answers(
        self, what: str, run_id: str, call: Callable[[], Awaitable[T]]
    ) -> T:
        """`call()`, again while the store is unreachable, for at most one lease."""
        return await retry_while_store_unavailable(
            call,
            self._rt.settings.lease_duration_seconds,
            "store_unavailable_retrying",
            step=what,
            run_id=run_id,
        )

    async def _begin_attempt(self, run_id: str, attempt: int) -> None:
        try:
            # The metadata event opens every attempt's events, in the same round trip.
            metadata = dumps({"run_id": run_id, "attempt": attempt})
            await self._rt.broker.begin_attempt(run_id, attempt, [("metadata", metadata)])
        except Exception:
            # Events of this attempt will still be fenced by the database writes.
            log.warning("begin_attempt_failed run_id=%s attempt=%s", run_id, attempt, exc_info=True)

    async def _execute_claimed(
        self, run: dict[str, Any], entry: RunningRun, deadline: float
    ) -> Outcome | None:
        events = EventPublisher(self._rt.broker, run["run_id"], entry.attempt)
        outcome = await self._run_graph(run, entry, events, deadline)
        while True:
            try:
                # Every event is stored before the outcome is: a client that sees the run
                # finished and replays its stream gets all of it.
                await events.flush()
                return outcome
            except StaleAttemptError:
                log.warning(
                    "run_stood_down run_id=%s attempt=%s reason=stale",
                    run["run_id"],
                    entry.attempt,
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
                    run["run_id"],
                    entry.attempt,
                    reason,
                )
                if outcome is None:
                    return None
                if outcome.status != RunStatus.INTERRUPTED:
                    outcome = await self._stopped(run, entry, reason, outcome.graph)

    async def _run_graph(
        self, run: dict[str, Any], entry: RunningRun, events: EventPublisher, deadline: float
    ) -> Outcome | None:
        rt = self._rt
        run_id = run["run_id"]
        kwargs = run["kwargs"]
        attempt = entry.attempt
        # The checkpoints this run writes are encrypted under its creator's context.
        use_context(kwargs.get(CONTEXT_KEY) or {})
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
                plain = await opened_run(rt, run)
                kwargs = plain["kwargs"]
                config = attempt_config(plain)
                graph = await self._graph(kwargs, config, entry, resources)
                graph_input = await attempt_input(self._rt.checkpointer, plain, config)
                await self._stream(graph, graph_input, config, kwargs, final, events)
        except asyncio.CancelledError:
            reason = absorb_stop(entry)
            if reason is None:
                raise
            return await self._stopped(run, entry, reason, graph)
        except StaleAttemptError:
            log.warning("run_stood_down run_id=%s attempt=%s reason=stale", run_id, attempt)
            return None
        except Exception as exc:
            if isinstance(exc, TimeoutError) and limit.expired():
                job_limit = rt.settings.bg_job_timeout_secs
                return Outcome(
                    RunStatus.TIMEOUT,
                    error={
                        "error": "TimeoutError",
                        "message": f"the run exceeded BG_JOB_TIMEOUT_SECS ({job_limit:g} s) "
                        "and was stopped",
                    },
                    graph=graph,
                )
            if store_unavailable(exc):
                # Not the graph's fault: the run resumes from its last checkpoint.
                return await self._hand_back(run, entry, "store_unavailable", graph)
            fault = store_fault(exc)
            if fault is not None:
                return await self._store_fault(run, entry, fault, graph)
            log.warning("run_failed run_id=%s error=%s", run_id, type(exc).__name__, exc_info=True)
            if isinstance(exc, DecryptionError):
                # The thread's state cannot be read back with these keys: the run ends
                # without it, once, rather than failing again while its end is written.
                return _ended_without_state(RunStatus.ERROR, "DecryptionError", str(exc))
            return Outcome(
                RunStatus.ERROR,
                error={"error": type(exc).__name__, "message": str(exc)},
                graph=graph,
            )
        return Outcome(RunStatus.SUCCESS, graph=graph, snapshot=_clean_end(final))

    async def _stream(
        self,
        graph: Pregel,
        graph_input: Any,
        config: dict[str, Any],
        kwargs: Mapping[str, Any],
        final: FinalState,
        events: EventPublisher,
    ) -> None:
        async for name, data in stream_graph(
            graph,
            graph_input,
            config,
            kwargs.get("stream_mode") or ["values"],
            subgraphs=bool(kwargs.get("stream_subgraphs")),
            context=kwargs.get("context"),
            interrupt_before=kwargs.get("interrupt_before"),
            interrupt_after=kwargs.get("interrupt_after"),
            durability=kwargs.get("durability"),
            final=final,
        ):
            await events.send(name, dumps(data))

    async def _stopped(
        self, run: dict[str, Any], entry: RunningRun, reason: str, graph: Pregel | None
    ) -> Outcome | None:
        if reason in ("interrupt", "rollback"):
            return cancelled(reason, graph)
        if reason == "release":
            return await self._hand_back(run, entry, "drain", graph)
        else:
            log.warning(
                "run_stood_down run_id=%s attempt=%s reason=%s",
                run["run_id"],
                entry.attempt,
                reason,
            )
        return None

    async def _store_fault(
        self, run: dict[str, Any], entry: RunningRun, fault: str, graph: Pregel | None
    ) -> Outcome | None:
        """The database refused a statement of this attempt (a timeout, exhausted resources:
        runyard/db/faults.py): the attempt counts, and the last one allowed fails the run."""
        limit = self._rt.settings.bg_job_max_retries
        counted = int(run["attempt"]) - int(run.get("handovers") or 0)
        log.warning(
            "run_attempt_store_fault run_id=%s attempt=%s counted=%s limit=%s error=%s",
            run["run_id"],
            entry.attempt,
            counted,
            limit,
            fault,
        )
        if counted < limit:
            return await self._hand_back(run, entry, "store_fault", graph, counted=True)
        message = (
            f"the database refused the run's statements on {counted} attempts "
            f"(BG_JOB_MAX_RETRIES={limit}); the last time: {fault}"
        )
        return Outcome(
            RunStatus.ERROR, error={"error": "StoreFault", "message": message}, graph=graph
        )

    async def _hand_back(
        self,
        run: dict[str, Any],
        entry: RunningRun,
        reason: str,
        graph: Pregel | None,
        counted: bool = False,
    ) -> Outcome | None:
        """Return the run to pending (if this attempt still holds it) and queue it again.

        A stop landing meanwhile does not cut it short (its reason is acted on after). A
        run with a cancel requested is not handed back: the attempt ends it, the outcome
        returned, as any cancel does.
        """
        rt = self._rt
        run_id = run["run_id"]

        async def release() -> bool | str:
            return await rt.lifecycle.release(run_id, entry.attempt, counted)

        try:
            released = await carry_through_stops(
                entry, self._until_store_answers("hand_back", run_id, release)
            )
        except Exception:
            # The lease runs out instead, and the reaper hands the run on.
            log.warning(
                "run_hand_back_failed run_id=%s attempt=%s reason=%s",
                run_id,
                entry.attempt,
                reason,
                exc_info=True,
            )
            return None
        if isinstance(released, str):
            log.info(
                "run_hand_back_cancelled run_id=%s attempt=%s reason=%s action=%s",
                run_id,
                entry.attempt,
                reason,
                released,
            )
            return await self._stopped(run, entry, released, graph)
        log.info(
            "run_handed_back run_id=%s attempt=%s reason=%s released=%s counted=%s",
            run_id,
            entry.attempt,
            reason,
            released,
            counted,
        )
        if released:
            try:
                push = rt.queue.push(run_id, 0.0, run["priority"], run["fairness_group"])
                await carry_through_stops(entry, push)
            except Exception:
                # The sweeper finds a pending run nobody queued.
                log.warning("run_requeue_failed run_id=%s", run_id, exc_info=True)
        return None

    async def _graph(
        self,
        kwargs: Mapping[str, Any],
        config: dict[str, Any],
        entry: RunningRun,
        resources: AsyncExitStack,
    ) -> Pregel:
        rt = self._rt
        run_id, attempt = entry.run_id, entry.attempt
        loaded = rt.graphs.get(kwargs["graph_id"])
        access = GraphAccess(
            access_context="threads.create_run",
            user=config["configurable"].get(AUTH_USER_KEY),
            store=rt.store,
            context=kwargs.get("context") or None,
        )
        graph = await resources.enter_async_context(loaded.open(config, access))

        saver = fenced(rt.checkpointer, run_id, attempt, empty=entry.thread_empty)
        saver = riding_out_store_faults(saver, rt.settings.lease_duration_seconds)
        saver = storing_no_stopped_tasks(saver)
        return graph.copy(update={"checkpointer": saver, "store": rt.store})


def _ended_without_state(status: RunStatus, error: str, message: str) -> Outcome:
    """An outcome recorded without reading the thread's state (that read is what failed)."""
    return Outcome(
        status,
        error={"error": error, "message": message},
        snapshot=ThreadSnapshot(None, {}, False),
    )


def _clean_end(final: FinalState) -> ThreadSnapshot | None:
    """The thread's state after a run that ended without interrupt, from its last values.

    None when the stream cannot tell (no values, or an interrupt): finalize reads the
    checkpoint instead.
    """
    if not final.seen or final.interrupted:
        return None
    return ThreadSnapshot(to_jsonable(final.values), {}, False)
