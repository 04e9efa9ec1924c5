"""Waiting for runs: join, the /wait result body, and event streams for SSE."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from contextlib import AsyncExitStack, suppress
from typing import TYPE_CHECKING, Any

from runyard.db import threads as threads_db
from runyard.db.engine import Sessions
from runyard.domain.errors import NotFoundError
from runyard.domain.results import with_interrupts
from runyard.domain.run import RunRecord
from runyard.domain.status import TERMINAL_RUN_STATUSES, CancelAction, RunStatus, ThreadStatus
from runyard.domain.stream_modes import event_in_modes
from runyard.encryption.encrypted_json import opened, opened_thread
from runyard.schemas.runs import RunCreate
from runyard.services.runs import RunService
from runyard.streaming.broker import (
    IDLE_CHECK_SECONDS,
    CompletionWaiter,
    EventBroker,
    EventsUnavailableError,
    StreamEvent,
)

if TYPE_CHECKING:
    from runyard.encryption.custom import CustomEncryption

log = logging.getLogger("runyard.runs")

LIVE_ONLY = "$"
SAFETY_RECHECK_SECONDS = 15.0


class CompletionWatch:
    """A registration for a run's completion, made before its status can change unseen.

    A join registers before it reads the run. A /wait passes `register` as `create_run`'s
    `on_created`, which runs between the commit and the dispatch; its body then sleeps
    until the run ends and reads all its events at once, instead of one blocking read per
    event.
    """

    def __init__(self, broker: EventBroker) -> None:
        self._broker = broker
        self._registration = AsyncExitStack()
        self.waiter: CompletionWaiter | None = None

    async def register(self, run_id: str) -> CompletionWaiter:
        """Register for the run's completion (no I/O: the signal listener is shared)."""
        self.waiter = await self._registration.enter_async_context(self._broker.done_waiter(run_id))
        return self.waiter

    async def close(self) -> None:
        """Release the registration (idempotent)."""
        await self._registration.aclose()


async def _keepalive(task: asyncio.Task[Any], interval: float) -> AsyncIterator[bytes]:
    """Newlines every `interval` until the task ends (JSON parsers skip leading whitespace)."""
    while True:
        done, _ = await asyncio.wait({task}, timeout=interval)
        if done:
            return
        yield b"\n"


class RunResult:
    """Folds a run's events into the /wait body, as LangGraph Platform computes it."""

    def __init__(self) -> None:
        self.latest: Any = None
        self.interrupts: list[Any] = []
        self.error: Any = None

    def absorb(self, event: StreamEvent) -> None:
        """Take one event into account."""
        if event.event == "error":
            self.error = json.loads(event.data)
        elif event.event in ("values", "updates"):
            data = json.loads(event.data)
            if isinstance(data, dict) and data.get("__interrupt__"):
                self.interrupts.extend(data["__interrupt__"])
            elif event.event == "values":
                self.latest = data

    def body(self) -> Any:
        """The result, or None when the events said nothing (use the stored result)."""
        if self.error is not None:
            return {"__error__": self.error}
        if self.interrupts:
            return with_interrupts(self.latest, self.interrupts)
        return self.latest


class RunWaits:
    """Waiting for runs to end, and reading their events and results."""

    def __init__(
        self,
        broker: EventBroker,
        autocommit: Sessions,
        runs: RunService,
        keepalive_seconds: float,
        spawn: Callable[[Coroutine[Any, Any, Any], str], None],
        encryption: CustomEncryption | None,
    ) -> None:
        self.broker = broker
        self.autocommit = autocommit
        self.runs = runs
        self.keepalive_seconds = keepalive_seconds
        self.spawn = spawn
        self.encryption = encryption

    def completion_watch(self) -> CompletionWatch:
        """A registration for a run's completion, to make before its status can change."""
        return CompletionWatch(self.broker)

    async def wait_until_done(self, thread_id: str | None, run_id: str) -> RunRecord:
        """Block until the run reaches a terminal status, woken by its completion signal."""
        while True:
            async with self.broker.done_waiter(run_id) as waiter:
                run = await self.runs.get_run(thread_id, run_id)
                if run.status in TERMINAL_RUN_STATUSES:
                    return run
                # The signal wakes us at once; the timeout only guards against a lost signal.
                await waiter.wait(timeout=SAFETY_RECHECK_SECONDS)

    async def wait_until_done_or_gone(self, run_id: str) -> RunRecord | None:
        """Like wait_until_done, but a run deleted meanwhile (rollback) counts as done: None."""
        try:
            return await self.wait_until_done(None, run_id)
        except NotFoundError:
            return None

    async def open_join(
        self, thread_id: str, run_id: str, grace: float = 0.0
    ) -> tuple[RunRecord, AsyncIterator[bytes] | None]:
        """The run, and unless it has finished, the streamed /join body that waits for it.

        The completion signal is registered for before the run is read, so one read is enough
        to know whether to wait. A run that ends within `grace` seconds is waited for here, so
        its answer needs no streamed body (most runs end within moments; a streamed body sends
        nothing but keep-alives before then anyway). The body closes the registration; one that
        never starts leaves it to the run's completion (and to garbage collection) to release.
        """
        watch = self.completion_watch()
        try:
            waiter = await watch.register(run_id)
            run = await self.runs.get_run(thread_id, run_id)
            ended = run.status in TERMINAL_RUN_STATUSES
            if not ended and grace > 0 and await waiter.wait(timeout=grace):
                # Deleted meanwhile (rolled back): the streamed body answers that at once.
                with suppress(NotFoundError):
                    run = await self.runs.get_run(thread_id, run_id)
        except BaseException:
            await watch.close()
            raise
        if run.status in TERMINAL_RUN_STATUSES:
            await watch.close()
            return run, None
        return run, self._join_body(run, watch, waiter, waited=grace > 0)

    async def _finished(
        self, run_id: str, watch: CompletionWatch, waiter: CompletionWaiter
    ) -> RunRecord | None:
        """The run once ended (None if deleted meanwhile), woken by its completion signal."""
        try:
            # The timeout only guards against a lost signal: the full wait re-checks then.
            await waiter.wait(timeout=SAFETY_RECHECK_SECONDS)
        finally:
            await watch.close()
        return await self.wait_until_done_or_gone(run_id)

    async def _join_body(
        self,
        run: RunRecord,
        watch: CompletionWatch,
        waiter: CompletionWaiter,
        waited: bool,
    ) -> AsyncIterator[bytes]:
        """The streamed /join response: newlines while the run executes, then its result.

        `waited`: the request already waited a keep-alive interval, so a newline goes first.
        """
        task = asyncio.create_task(
            self._finished(run.run_id, watch, waiter), name=f"join:{run.run_id}"
        )
        try:
            if waited:
                yield b"\n"
            async for newline in _keepalive(task, self.keepalive_seconds):
                yield newline
            done = task.result()
            body = await self.result_body(done) if done else {}
            yield json.dumps(body, ensure_ascii=False).encode()
        finally:
            if not task.done():
                task.cancel()
            await watch.close()  # already closed unless the task was cut short

    async def result_body(self, run: RunRecord) -> dict[str, Any]:
        """What /join and /wait return: the error, the pending interrupts, or the final values.

        A successful run stored that answer when it finished; other runs (interrupted by a
        cancel) answer with the thread's state.
        """
        ended = {"output": run.output, "error": run.error}
        stored = await opened(self, "run", ended, ("output", "error"))
        if run.status in (RunStatus.ERROR, RunStatus.TIMEOUT):
            return {"__error__": stored["error"] or {"error": "Error", "message": run.status.value}}
        output = stored["output"]
        if output is not None:
            return dict(output) if isinstance(output, dict) else {"values": output}
        async with self.autocommit() as session:
            thread = await threads_db.get_thread(session, run.thread_id)
        if thread is None:
            return {}
        thread = await opened_thread(self, thread, ("values", "interrupts"))
        values = dict(thread.values) if thread.values else {}
        if thread.status == ThreadStatus.INTERRUPTED and thread.interrupts:
            flat = [i for items in thread.interrupts.values() for i in items]
            return dict(with_interrupts(values, flat))
        return values

    async def final_result(self, run: RunRecord, watch: CompletionWatch | None = None) -> Any:
        """The /wait result of a run once it has ended: its error, its interrupts or its values.

        With a `watch` registered as the run was created, the events are read once the run has
        ended; without one (a run that already existed), they are followed as they come.
        """
        result = RunResult()
        ended = self._ended(run)
        follow = True
        if watch is not None and watch.waiter is not None:
            # The timeout only guards against a lost signal, as a quiet subscription does.
            while not await watch.waiter.wait(timeout=IDLE_CHECK_SECONDS):
                if await ended():
                    break
            await watch.close()
            # It has ended: what is stored is all there is (read once, nothing to follow).
            follow = False
        try:
            events = self.broker.subscribe(run.run_id, follow=follow, ended=ended)
            async for event in events:
                result.absorb(event)
            body = result.body()
        except EventsUnavailableError as exc:
            # The run has ended but its events cannot be read: the database has its result.
            log.warning("run_result_from_database run_id=%s reason=%s", run.run_id, exc)
            body = None
        if body is None:
            try:
                finished = await self.runs.get_run(None, run.run_id)
            except Exception:
                return {}
            body = await self.result_body(finished)
        return body

    async def run_to_end(
        self,
        thread_id: str | None,
        body: RunCreate,
        *,
        stream_modes: list[str] | None = None,
        new_thread_metadata: dict[str, Any] | None = None,
        configurable: dict[str, Any] | None = None,
    ) -> tuple[RunRecord, Any]:
        """Create a run, wait for it to end, and return it with its /wait result.

        The completion signal is registered for between the commit and the dispatch, as /wait
        does, so the end of a run that executes on another instance is never missed.
        """
        watch = self.completion_watch()
        try:
            run = await self.runs.create_run(
                thread_id,
                body,
                stream_modes=stream_modes,
                new_thread_metadata=new_thread_metadata,
                configurable=configurable,
                on_created=watch.register,
            )
            return run, await self.final_result(run, watch)
        finally:
            await watch.close()

    async def wait_body(
        self,
        run: RunRecord,
        cancel_on_disconnect: bool,
        watch: CompletionWatch | None = None,
    ) -> AsyncIterator[bytes]:
        """The streamed /wait response: newlines while the run executes, then its JSON result."""
        task = asyncio.create_task(self.final_result(run, watch), name=f"wait:{run.run_id}")
        finished = False
        try:
            async for newline in _keepalive(task, self.keepalive_seconds):
                yield newline
            payload = task.result()
            finished = True
            yield json.dumps(payload, ensure_ascii=False).encode()
        finally:
            if not task.done():
                task.cancel()
            if watch is not None:
                await watch.close()
            if not finished and cancel_on_disconnect:
                self.spawn(self._cancel_quietly(run.run_id), f"cancel-on-disconnect:{run.run_id}")

    async def run_events(
        self,
        run: RunRecord,
        after: str | None,
        modes: list[str] | None,
        cancel_on_disconnect: bool,
    ) -> AsyncIterator[StreamEvent]:
        """A run's events for SSE: replay after `after` (or live only), filtered by mode."""
        follow = run.status not in TERMINAL_RUN_STATUSES
        finished = False
        try:
            try:
                async for event in self.broker.subscribe(
                    run.run_id, after, follow=follow, ended=self._ended(run)
                ):
                    if modes is None or event_in_modes(event.event, modes):
                        yield event
            except EventsUnavailableError as exc:
                log.warning("run_stream_ended_from_database run_id=%s reason=%s", run.run_id, exc)
                async for event in self.stored_ending(run.run_id, modes):
                    yield event
            finished = True
        finally:
            if not finished and cancel_on_disconnect:
                self.spawn(self._cancel_quietly(run.run_id), f"cancel-on-disconnect:{run.run_id}")

    async def stored_ending(
        self, run_id: str, modes: list[str] | None
    ) -> AsyncIterator[StreamEvent]:
        """The end of a run's stream as the database tells it, for when its events cannot be
        read: its error, or its final values, then `end`. These carry no id: a client that
        resumes after them resumes after the last event it had from the log."""
        try:
            run = await self.runs.get_run(None, run_id)
        except NotFoundError:
            return
        body = await self.result_body(run)
        if "__error__" in body:
            yield StreamEvent("", "error", json.dumps(body["__error__"], ensure_ascii=False))
        elif modes is None or "values" in modes:
            yield StreamEvent("", "values", json.dumps(body, ensure_ascii=False, default=str))
        yield StreamEvent("", "end", "null")

    def _ended(self, run: RunRecord) -> Callable[[], Awaitable[bool]]:
        """Whether the run has ended (or is gone), for a subscription that heard nothing."""

        async def ended() -> bool:
            try:
                current = await self.runs.get_run(None, run.run_id)
            except NotFoundError:
                return True
            return current.status in TERMINAL_RUN_STATUSES

        return ended

    async def _cancel_quietly(self, run_id: str) -> None:
        try:
            await self.runs.cancel_run(None, run_id, CancelAction.INTERRUPT)
            log.info("run_cancelled_on_disconnect run_id=%s", run_id)
        except Exception as exc:
            log.info("run_cancel_on_disconnect_skipped run_id=%s reason=%s", run_id, exc)
