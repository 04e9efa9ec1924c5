"""The thread streaming session's event sequence: every session run of a thread, in order.

The session reads the same per-run event logs in the broker as run and thread streams do.
Runs are followed in creation order (the next one found in the database, polled while the
thread is idle, as a thread stream does), each run's entries turned into protocol events by
`RunTranslator`. The whole thread is replayed from its first retained run and numbered as it
goes: `seq` is the event's position in the thread, the same on every instance and every
replay, so a client resumes with `since` anywhere; nothing is written per event.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any

from runyard.db import runs as runs_db
from runyard.db import threads as threads_db
from runyard.db.engine import Sessions
from runyard.domain.errors import NotFoundError
from runyard.domain.run import RunRecord
from runyard.domain.status import TERMINAL_RUN_STATUSES, RunStatus
from runyard.encryption.encrypted_json import opened
from runyard.graphs.streaming import PROTOCOL_MODE
from runyard.services.run_arrivals import POLL_SECONDS, RunArrivals, anchor_of
from runyard.services.run_waits import RunWaits
from runyard.services.runs import RunService
from runyard.services.thread_state import thread_not_found
from runyard.streaming.broker import EventBroker, EventsUnavailableError, StreamEvent
from runyard.streaming.session_events import RunTranslator, protocol_event

if TYPE_CHECKING:
    from runyard.encryption.custom import CustomEncryption

log = logging.getLogger("runyard.session")

# How often a session waiting for its thread to be created looks for it.
NEXT_RUN_POLL_SECONDS = POLL_SECONDS
_PAGE = 50


class ResumeGap(Exception):
    """A `since` cursor older than what the session can replay exactly."""

    def __init__(self, since: int, min_available_seq: int) -> None:
        super().__init__(
            f"resume gap: since={since} is older than the replay buffer, which starts at "
            f"seq {min_available_seq}; open the stream without since to replay from there"
        )
        self.since = since
        self.min_available_seq = min_available_seq


def is_session_run(run: RunRecord) -> bool:
    """Whether the run was started by the session (its log holds protocol events)."""
    kwargs = run.kwargs or {}
    return PROTOCOL_MODE in (kwargs.get("stream_mode") or [])


def graph_name(run: RunRecord) -> str:
    """The root graph's name, as the root lifecycle events give it."""
    kwargs = run.kwargs or {}
    return str(kwargs.get("graph_id") or run.assistant_id)


def _ms(value: Any) -> int:
    try:
        return int(value.timestamp() * 1000)
    except (AttributeError, TypeError, ValueError):
        return 0


def _tail(event: dict[str, Any]) -> dict[str, Any]:
    return {"method": event["method"], "params": event["params"]}


def _translate(translator: RunTranslator, entry: StreamEvent) -> list[dict[str, Any]]:
    return translator.translate(entry.id, entry.event, entry.data)


def _error_message(error: Any) -> str | None:
    if isinstance(error, dict):
        return str(error.get("message") or error.get("error") or "") or None
    return None


class ThreadSession:
    """A thread's streaming session: its runs' events in the session protocol, replayed and live."""

    def __init__(
        self,
        autocommit: Sessions,
        broker: EventBroker,
        run_arrivals: RunArrivals,
        runs: RunService,
        waits: RunWaits,
        replay_limit: int,
        encryption: CustomEncryption | None,
    ) -> None:
        self.autocommit = autocommit
        self.broker = broker
        self.run_arrivals = run_arrivals
        self.runs = runs
        self.waits = waits
        self.replay_limit = replay_limit
        self.encryption = encryption

    async def thread_events(
        self, thread_id: str, since: int | None, first: list[Any] | None = None
    ) -> AsyncIterator[dict[str, Any]]:
        """The thread's protocol events with their seq, those after `since` (all when None),
        following live until the thread is deleted or the client leaves. `first` (the
        thread's first page of runs, from `first_runs`) is emptied as it is taken.

        With `since`, the stored events after it are gathered first: more than the settings'
        `session_replay_events` of them raise ResumeGap, before anything is yielded.
        """
        limit = self.replay_limit
        seq = 0
        pending: deque[dict[str, Any]] = deque()
        overflowed = False
        caught_up = since is None
        if first is None:
            first = await self.first_runs(thread_id, 0.0)
        async for item in self._run_events(thread_id, first, boundary=since is not None):
            if item is None:
                if not caught_up:
                    caught_up = True
                    if overflowed:
                        raise ResumeGap(int(since or 0), pending[0]["seq"] if pending else seq + 1)
                    while pending:
                        yield pending.popleft()
                continue
            seq += 1
            if since is not None and seq <= since:
                continue
            event = {"type": "event", "event_id": item["event_id"], "seq": seq, **_tail(item)}
            if caught_up:
                yield event
                continue
            pending.append(event)
            if len(pending) > limit:
                pending.popleft()
                overflowed = True

    async def _run_events(
        self, thread_id: str, first: list[Any], boundary: bool
    ) -> AsyncIterator[dict[str, Any] | None]:
        """Each session run of the thread in turn (from `first`, its first page of runs),
        translated, waiting for the next one; None marks where the stored events end and live
        ones begin. Ends when the thread is deleted.

        Rows are let go as they are read (`first` is emptied at once): a stream that waits, or
        whose client does not read, holds no page of runs (a few kilobytes a row)."""
        pending: deque[RunRecord] = deque(first)
        first.clear()
        full = len(pending) == _PAGE
        anchor: tuple[Any, str] | None = None
        async with self.run_arrivals.watch(thread_id) as arrivals:
            while True:
                while pending:
                    row = pending.popleft()
                    anchor = anchor_of(row)
                    run = row if is_session_run(row) else None
                    del row
                    if run is not None:
                        async for event in self.run_protocol_events(run, boundary=boundary):
                            yield event
                if full:
                    # More stored runs: read on, without a pause (nor a live mark).
                    async with self.autocommit() as session:
                        page = await runs_db.runs_created_after(session, thread_id, anchor, _PAGE)
                    pending.extend(page)
                    full = len(page) == _PAGE
                    # Not kept while the stream waits for the thread's next run below.
                    del page
                    continue
                # A reader that got its run's end leaves now: look for the next run only later.
                yield None
                # Shared with every stream of the thread here; None once the thread is deleted.
                upcoming = await arrivals.after(anchor, _PAGE)
                if upcoming is None:
                    return
                pending.extend(upcoming)
                full = len(upcoming) == _PAGE
                del upcoming

    async def first_runs(self, thread_id: str, wait: float) -> list[RunRecord]:
        """The thread's first page of runs, once the thread exists (waited for up to `wait`
        seconds: a client opens its stream as it sends the `run.start` that creates the
        thread); NotFoundError if it never appears."""
        for attempt in range(max(1, int(wait / NEXT_RUN_POLL_SECONDS))):
            if attempt:
                await asyncio.sleep(NEXT_RUN_POLL_SECONDS)
            async with self.autocommit() as session:
                rows = await runs_db.runs_created_after(session, thread_id, None, _PAGE)
                if rows or await threads_db.get_thread(session, thread_id) is not None:
                    return list(rows)
        raise thread_not_found(thread_id)

    async def run_protocol_events(
        self,
        run: RunRecord,
        follow: bool = True,
        translator: RunTranslator | None = None,
        boundary: bool = False,
    ) -> AsyncIterator[dict[str, Any] | None]:
        """One run's protocol events (without seq): the root's running lifecycle, its log
        translated, then its closing lifecycle once it has ended. Without `follow`, only what
        is stored; with `boundary`, None marks where the stored events of a running run end."""
        translator = translator or RunTranslator(run.run_id, graph_name(run))
        for event in translator.start(_ms(run.created_at)):
            yield event
        run_id = run.run_id
        running = run.status not in TERMINAL_RUN_STATUSES
        live = running and follow
        last: str | None = None
        try:
            if not live or boundary:
                async for entry in self.broker.subscribe(run_id, None, follow=False):
                    last = entry.id
                    for event in _translate(translator, entry):
                        yield event
            if running and not follow:
                return
            if live:
                if boundary:
                    yield None
                ended = self._ended(run_id)
                async for entry in self.broker.subscribe(run_id, last, ended=ended):
                    for event in _translate(translator, entry):
                        yield event
        except EventsUnavailableError as exc:
            # The run has ended and Redis cannot give its log now (it is restarting): end the
            # run as the database tells it, as /runs/stream does, and go on to the next run.
            log.warning("session_run_ended_from_database run_id=%s reason=%s", run_id, exc)
            async for event in self._stored_ending(run_id, translator):
                yield event
            return
        status: str | None = run.status.value
        error = await self._stored_error(run)
        if live:
            told = translator.ended_as()
            if told is not None:
                status, error = told, translator.error
            else:
                status, error = await self._final_status(run_id)
        for event in translator.finish(status, error):
            yield event

    async def _stored_ending(
        self, run_id: str, translator: RunTranslator
    ) -> AsyncIterator[dict[str, Any]]:
        """A run's end from the database, for when its log cannot be read: its final values
        (what /wait answers), then its closing lifecycle."""
        try:
            run = await self.runs.get_run(None, run_id)
        except NotFoundError:
            for event in translator.finish(None, None):
                yield event
            return
        body = await self.waits.result_body(run)
        if "__error__" not in body:
            params = {"namespace": [], "timestamp": translator.last_timestamp, "data": body}
            yield protocol_event(f"{run_id}:stored:values", "values", params)
        for event in translator.finish(run.status.value, await self._stored_error(run)):
            yield event

    def _ended(self, run_id: str) -> Callable[[], Awaitable[bool]]:
        async def ended() -> bool:
            status, _ = await self._final_status(run_id)
            return status is None or RunStatus(status) in TERMINAL_RUN_STATUSES

        return ended

    async def _final_status(self, run_id: str) -> tuple[str | None, str | None]:
        """The run's status and error message (None when the run is gone)."""
        try:
            run = await self.runs.get_run(None, run_id)
        except NotFoundError:
            return None, None
        return run.status.value, await self._stored_error(run)

    async def _stored_error(self, run: RunRecord) -> str | None:
        """The message of a stored run's error (decrypted, encryption.path)."""
        stored = await opened(self, "run", {"error": run.error}, ("error",))
        return _error_message(stored["error"])
