"""The event broker protocol and its in-memory implementation (dev mode, one process)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from typing import Protocol

from runyard.domain.errors import RunyardError, StaleAttemptError


class EventsUnavailableError(RunyardError):
    """A run's stored events cannot be read now (Redis is away) although the run has ended:
    its final state is in the database."""

    status_code = 503


@dataclass(frozen=True)
class StreamEvent:
    """One event of a run's stream: its id, SSE event name and JSON text."""

    id: str
    event: str
    data: str


class CompletionWaiter(Protocol):
    """A registration made before checking the database, so no completion is missed."""

    async def wait(self, timeout: float | None) -> bool:
        """True once the run's completion was signalled, False on timeout."""
        ...


class EventBroker(Protocol):
    """Carries a run's events to every subscriber, with replay by id."""

    async def begin_attempt(
        self, run_id: str, attempt: int, events: Sequence[tuple[str, str]] = ()
    ) -> None:
        """Fence out older attempts (their later publishes are refused), then publish
        `events` as this attempt (one round trip on Redis)."""
        ...

    async def publish(self, run_id: str, event: str, data: str, attempt: int | None = None) -> str:
        """Append an event to the run's log and wake subscribers; returns its id.

        With an attempt, raises StaleAttemptError when a newer attempt holds the run.
        """
        ...

    async def publish_batch(
        self, run_id: str, events: Sequence[tuple[str, str]], attempt: int | None = None
    ) -> str:
        """Append several (event, data) in order, as `publish` would one by one (one round
        trip on Redis); returns the last id."""
        ...

    async def finish(
        self,
        run_id: str,
        attempt: int | None = None,
        last_events: Sequence[tuple[str, str]] = (),
        signal_done: bool = False,
    ) -> None:
        """Publish `last_events` (event, data), then mark the run's stream as complete:
        subscribers stop after the last event. With `signal_done`, also what `signal_done`
        does (one round trip on Redis for all of it)."""
        ...

    def subscribe(
        self,
        run_id: str,
        after: str | None = None,
        follow: bool = True,
        ended: Ended | None = None,
    ) -> AsyncIterator[StreamEvent]:
        """Events after `after` (all when None), then live ones until the stream finishes.

        With follow=False only what is already stored is replayed (the run has ended);
        after="$" skips everything stored and delivers only new events (none, and the
        subscription ends at once, when the stream has finished). `ended` is asked
        whenever no event came for a while: once it says the run has ended, what is stored
        is delivered and the subscription stops, even if the stream was never finished
        (its last events could not be written). While the broker cannot be reached the
        subscription waits for it; once `ended` says the run has ended and what is stored
        still cannot be read, it raises EventsUnavailableError (the database has the result).
        """
        ...

    async def forget(self, run_id: str) -> None:
        """Drop the run's log (the run was deleted)."""
        ...

    async def signal_done(self, run_id: str) -> None:
        """Wake everyone waiting for the run to finish."""
        ...

    def done_waiter(self, run_id: str) -> AbstractAsyncContextManager[CompletionWaiter]:
        """Register interest in the run's completion (use before reading its status)."""
        ...


# Asked by a subscription that saw no event for a while: has the run ended?
Ended = Callable[[], Awaitable[bool]]
# How long a following subscription waits for an event before it asks `ended`.
IDLE_CHECK_SECONDS = 5.0
# How long a subscription told the run has ended still waits for the run's last events: the
# end is committed before they are appended (runyard/lifecycle/endings.py), and a busy instance may
# take a while between the two. Only a run whose last events never come (Redis lost them, or
# the instance died in between) waits this long.
FINAL_EVENTS_GRACE_SECONDS = 5.0


@dataclass
class _RunLog:
    events: list[StreamEvent] = field(default_factory=list)
    first_seq: int = 1
    next_seq: int = 1
    finished_at: float | None = None
    changed: asyncio.Event = field(default_factory=asyncio.Event)


class _FutureWaiter:
    def __init__(self, future: asyncio.Future[None]) -> None:
        self._future = future

    async def wait(self, timeout: float | None) -> bool:
        if self._future.done():
            return True
        try:
            async with asyncio.timeout(timeout):
                await asyncio.shield(self._future)
        except TimeoutError:
            return False
        return True


class LocalWaiters:
    """This process's waiters per run: futures resolved when the run's completion is seen."""

    def __init__(self) -> None:
        self._waiters: dict[str, set[asyncio.Future[None]]] = {}

    def resolve(self, run_id: str) -> None:
        """Wake every local waiter of the run."""
        for future in self._waiters.pop(run_id, set()):
            if not future.done():
                future.set_result(None)

    def resolve_all(self) -> None:
        """Wake every waiter (they re-check the database)."""
        for run_id in list(self._waiters):
            self.resolve(run_id)

    @asynccontextmanager
    async def waiter(self, run_id: str) -> AsyncIterator[CompletionWaiter]:
        """Register a waiter for the run's completion."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.setdefault(run_id, set()).add(future)
        try:
            yield _FutureWaiter(future)
        finally:
            group = self._waiters.get(run_id)
            if group is not None:
                group.discard(future)
                if not group:
                    self._waiters.pop(run_id, None)
            if not future.done():
                future.cancel()


class InMemoryEventBroker:
    """Per-run event logs in memory, bounded in length and expired after they finish."""

    def __init__(
        self,
        retention_seconds: float = 3600.0,
        max_events: int = 10_000,
        idle_check_seconds: float = IDLE_CHECK_SECONDS,
        final_events_grace_seconds: float = FINAL_EVENTS_GRACE_SECONDS,
    ) -> None:
        self._idle_check = idle_check_seconds
        self._final_grace = final_events_grace_seconds
        self._logs: dict[str, _RunLog] = {}
        self._waiters = LocalWaiters()
        self._attempts: dict[str, int] = {}
        self._retention = retention_seconds
        self._max_events = max_events
        self._last_purge = time.monotonic()

    def _log(self, run_id: str) -> _RunLog:
        log = self._logs.get(run_id)
        if log is None:
            self._purge_expired()
            log = self._logs[run_id] = _RunLog()
        return log

    def _purge_expired(self) -> None:
        now = time.monotonic()
        if now - self._last_purge < 10:
            return
        self._last_purge = now
        expired = [
            rid
            for rid, log in self._logs.items()
            if log.finished_at is not None and now - log.finished_at > self._retention
        ]
        for rid in expired:
            del self._logs[rid]
            self._attempts.pop(rid, None)

    async def begin_attempt(
        self, run_id: str, attempt: int, events: Sequence[tuple[str, str]] = ()
    ) -> None:
        """Record the newest attempt of the run, then publish `events` as it."""
        self._attempts[run_id] = max(attempt, self._attempts.get(run_id, 0))
        await self.publish_batch(run_id, events, attempt)

    async def publish(self, run_id: str, event: str, data: str, attempt: int | None = None) -> str:
        """Append an event and wake subscribers."""
        if attempt is not None and self._attempts.get(run_id, 0) > attempt:
            raise StaleAttemptError(f"attempt {attempt} of run {run_id} is no longer current")
        log = self._log(run_id)
        event_id = str(log.next_seq)
        log.events.append(StreamEvent(event_id, event, data))
        log.next_seq += 1
        if len(log.events) > self._max_events:
            drop = len(log.events) - self._max_events
            del log.events[:drop]
            log.first_seq += drop
        self._wake(log)
        return event_id

    async def publish_batch(
        self, run_id: str, events: Sequence[tuple[str, str]], attempt: int | None = None
    ) -> str:
        """Append several events in order."""
        last = ""
        for event, data in events:
            last = await self.publish(run_id, event, data, attempt)
        return last

    async def finish(
        self,
        run_id: str,
        attempt: int | None = None,
        last_events: Sequence[tuple[str, str]] = (),
        signal_done: bool = False,
    ) -> None:
        """Publish the last events, then mark the stream complete (and signal the run's
        completion with `signal_done`)."""
        await self.publish_batch(run_id, last_events, attempt)
        log = self._log(run_id)
        log.finished_at = time.monotonic()
        self._wake(log)
        if signal_done:
            await self.signal_done(run_id)

    @staticmethod
    def _wake(log: _RunLog) -> None:
        log.changed.set()
        log.changed = asyncio.Event()

    async def subscribe(
        self,
        run_id: str,
        after: str | None = None,
        follow: bool = True,
        ended: Ended | None = None,
    ) -> AsyncIterator[StreamEvent]:
        """Replay, then follow live events until the stream finishes (or `ended` says so)."""
        log = self._logs.get(run_id)
        if log is None:
            if not follow:
                return
            log = self._log(run_id)
        if after == "$":
            next_seq = log.next_seq
        else:
            next_seq = _parse_seq(after) + 1 if after else 1
        while True:
            changed = log.changed
            start = max(next_seq - log.first_seq, 0)
            batch = log.events[start:]
            for item in batch:
                yield item
            next_seq = log.first_seq + start + len(batch)
            if (log.finished_at is not None or not follow) and next_seq >= log.next_seq:
                return
            if next_seq >= log.next_seq:
                if ended is None:
                    await changed.wait()
                    continue
                # Not wait_for: in Python 3.11 it swallows a cancellation that comes as the
                # wait completes, and the subscriber would follow the run on.
                try:
                    async with asyncio.timeout(self._idle_check):
                        await changed.wait()
                except TimeoutError:
                    follow = not await ended() or await self._final_events_come(changed)

    async def _final_events_come(self, changed: asyncio.Event) -> bool:
        """Whether anything is appended to a run seen ended within the grace for its last
        events (see FINAL_EVENTS_GRACE_SECONDS)."""
        try:
            async with asyncio.timeout(self._final_grace):
                await changed.wait()
        except TimeoutError:
            return False
        return True

    async def forget(self, run_id: str) -> None:
        """Drop the run's log."""
        log = self._logs.pop(run_id, None)
        if log is not None:
            log.finished_at = time.monotonic()
            self._wake(log)

    async def signal_done(self, run_id: str) -> None:
        """Resolve every waiter of the run."""
        self._waiters.resolve(run_id)

    def done_waiter(self, run_id: str) -> AbstractAsyncContextManager[CompletionWaiter]:
        """Register a waiter for the run's completion."""
        return self._waiters.waiter(run_id)


def _parse_seq(event_id: str) -> int:
    try:
        return int(event_id.split("-", 1)[0])
    except ValueError:
        return 0
