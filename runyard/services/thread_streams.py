"""The thread stream: every run of a thread in turn (runs created later included), its state
updates, and a `run_done` marker after each run, as LangGraph Platform's join_stream sends.

Runs of a thread execute one after another, so the stream follows them in creation order,
each through the run's own replayable event log; the next run is found in the database
(polled while the thread is idle, once for all of its streams here: see run_arrivals), so
any instance can serve the stream. State updates go
through a per-thread log in the same broker. Every event id carries both positions (the
run and its event, the last state update), so `Last-Event-ID` resumes both exactly.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Coroutine
from dataclasses import dataclass
from typing import Any

from runyard.db import runs as runs_db
from runyard.db import threads as threads_db
from runyard.db.engine import Sessions
from runyard.domain.errors import InvalidInputError
from runyard.domain.run import RunRecord
from runyard.domain.status import RunStatus
from runyard.domain.stream_modes import STREAM_MODES, event_in_modes
from runyard.services.run_arrivals import RunArrivals
from runyard.services.run_waits import LIVE_ONLY, RunWaits
from runyard.services.thread_state import thread_not_found
from runyard.streaming.broker import EventBroker, StreamEvent
from runyard.streaming.fanout import BUSY, Fanout, Fanouts
from runyard.streaming.sse_frames import FramedEvent, framed
from runyard.streaming.thread_log import state_log

log = logging.getLogger("runyard.threads")

THREAD_STREAM_MODES = ("run_modes", "lifecycle", "state_update")
# Run stream modes a thread stream also takes: only their run events are sent.
RUN_EVENT_MODES = tuple(mode for mode in STREAM_MODES if mode not in THREAD_STREAM_MODES)
# Events (or batches of a shared follower's events) a thread stream holds between its
# producers and its client.
STREAM_QUEUE_EVENTS = 16
# The streams that share a thread's follower write about this many times a second together
# (each waits `members / SHARED_WRITES_PER_SECOND` after a write, at most
# MAX_WRITE_PAUSE_SECONDS, and sends every event since in its next write): a few streams write
# each event at once, hundreds batch them.
SHARED_WRITES_PER_SECOND = 1000
MAX_WRITE_PAUSE_SECONDS = 0.25
_DONE = "done"
_NONE = "-"
# What a thread stream's producers queue: one event, a batch, or None (the stream ends).
_Queued = StreamEvent | list[StreamEvent] | None


@dataclass
class Cursor:
    """Where a thread stream is: the run it follows and that run's last event delivered
    (`done` once its run_done went out), and the last state update delivered."""

    run_id: str | None = None
    event_id: str | None = None
    state_id: str | None = None

    def encode(self) -> str:
        """The SSE id: `run_id:event_id~state_id`, `-` for a part not started."""
        run = f"{self.run_id}:{self.event_id or ''}" if self.run_id else _NONE
        return f"{run}~{self.state_id or _NONE}"

    @classmethod
    def parse(cls, raw: str) -> Cursor:
        """The cursor a Last-Event-ID names; `-`, or an id this stream never sent, is the
        beginning (as a run stream replays from its start after an id it does not know)."""
        run, sep, state = raw.partition("~")
        run_id, colon, event_id = run.partition(":")
        if raw == _NONE or not sep or not state or (run != _NONE and (not colon or not run_id)):
            return cls()
        return cls(
            run_id=None if run == _NONE else run_id,
            event_id=(event_id or None) if run != _NONE else None,
            state_id=None if state == _NONE else state,
        )


@dataclass(frozen=True)
class ThreadStreamModes:
    """What a thread stream sends: the runs' events (`run_events`: None for all of them,
    empty for their start and end only, else those modes'), and the state updates."""

    runs: bool
    run_events: tuple[str, ...] | None
    state: bool

    def delivers(self, event: str) -> bool:
        """Whether a run event goes out (a run's start and run_done markers always do)."""
        if event == "end":
            return False
        if self.run_events is None or event == "metadata":
            return True
        return bool(self.run_events) and event_in_modes(event, self.run_events)


def parse_thread_stream_modes(raw: list[str] | None) -> ThreadStreamModes:
    """Modes from repeated params or comma lists; `run_modes` when none is given.

    The thread's own modes (`run_modes`, `lifecycle`, `state_update`) and run stream modes
    (`values`, `messages-tuple`...) mix: run modes add their events to the lifecycle.
    """
    modes = [part.strip() for value in raw or [] for part in value.split(",") if part.strip()]
    wrong = [mode for mode in modes if mode not in (*THREAD_STREAM_MODES, *RUN_EVENT_MODES)]
    if wrong:
        raise InvalidInputError(
            f"unknown thread stream mode {wrong}; choose from {', '.join(THREAD_STREAM_MODES)}, "
            f"or run stream modes to receive only their events: {', '.join(RUN_EVENT_MODES)}"
        )
    modes = modes or ["run_modes"]
    picked = tuple(dict.fromkeys(mode for mode in modes if mode in RUN_EVENT_MODES))
    return ThreadStreamModes(
        runs="run_modes" in modes or "lifecycle" in modes or bool(picked),
        run_events=None if "run_modes" in modes else picked,
        state="state_update" in modes,
    )


async def _guarded(
    producer: Coroutine[Any, Any, None], thread_id: str, queue: asyncio.Queue[_Queued]
) -> None:
    """Run a producer; if it fails, end the stream instead of leaving the client waiting."""
    try:
        await producer
    except Exception:
        log.exception("thread_stream_failed thread_id=%s", thread_id)
        await queue.put(None)


# What a thread's shared follower hands out: a run's id, the id of one of its events (`done`
# for its run_done marker, last), and the event as a stream with no state position sends it
# (its SSE text made once for every stream).
SharedItem = tuple[str, str, FramedEvent]


def _shared(run_id: str, event_id: str, event: str, data: str) -> SharedItem:
    sent_as = StreamEvent(Cursor(run_id, event_id).encode(), event, data)
    return run_id, event_id, framed(sent_as)


# Where a stream starts: the (created_at, run_id) after which runs are new (None: every run),
# and a run to stream first with the event to resume after, when joining in one's middle.
_Start = tuple[tuple[Any, str] | None, tuple[RunRecord, str | None] | None]


class ThreadStreams:
    """A thread's event stream: its state updates and its runs' events, shared by its viewers."""

    def __init__(
        self,
        autocommit: Sessions,
        broker: EventBroker,
        run_arrivals: RunArrivals,
        fanouts: Fanouts[Any],
        waits: RunWaits,
    ) -> None:
        self.autocommit = autocommit
        self.broker = broker
        self.run_arrivals = run_arrivals
        self.fanouts = fanouts
        self.waits = waits

    async def open_thread_events(
        self, thread_id: str, last_event_id: str | None, modes: ThreadStreamModes
    ) -> AsyncIterator[list[StreamEvent]]:
        """The thread's events until it is deleted (or the client leaves); a bad Last-Event-ID
        or a missing thread raise here, before anything is streamed."""
        cursor = Cursor.parse(last_event_id) if last_event_id else None
        async with self.autocommit() as session:
            if await threads_db.get_thread(session, thread_id) is None:
                raise thread_not_found(thread_id)
        # Fixed before anything is sent: a run created once the response has begun is new.
        start = await self._starting_point(thread_id, cursor)
        return self._thread_events(thread_id, cursor, start, modes)

    async def _thread_events(
        self,
        thread_id: str,
        cursor: Cursor | None,
        start: _Start,
        modes: ThreadStreamModes,
    ) -> AsyncIterator[list[StreamEvent]]:
        """Batches of events: whatever the producers queued since the client last took some."""
        position = cursor or Cursor()
        # Small: it only joins the two producers. A client that stops reading stops them soon
        # after its socket fills, so it holds a few events and follows no further run.
        queue: asyncio.Queue[_Queued] = asyncio.Queue(maxsize=STREAM_QUEUE_EVENTS)
        producers: list[tuple[str, Coroutine[Any, Any, None]]] = []
        if modes.runs:
            producers.append(("runs", self._follow_runs(thread_id, start, position, queue, modes)))
        if modes.state:
            after = position.state_id if cursor is not None else LIVE_ONLY
            producers.append(("state", self._follow_state(thread_id, after, position, queue)))
        # Owned by this stream: cancelled and awaited when it ends or the client leaves.
        tasks = [
            asyncio.create_task(_guarded(producer, thread_id, queue), name=f"thread-stream:{name}")
            for name, producer in producers
        ]
        try:
            while True:
                events: list[StreamEvent] = []
                item = await queue.get()
                while True:
                    if isinstance(item, list):
                        events.extend(item)
                    elif item is not None:
                        events.append(item)
                    if item is None or queue.empty():
                        break
                    item = queue.get_nowait()
                if events:
                    yield events
                if item is None:
                    return  # the thread is gone, or a producer failed (the client resumes)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _follow_state(
        self,
        thread_id: str,
        after: str | None,
        position: Cursor,
        queue: asyncio.Queue[_Queued],
    ) -> None:
        async def never_ends() -> bool:
            return False

        async for event in self.broker.subscribe(state_log(thread_id), after, ended=never_ends):
            position.state_id = event.id
            await queue.put(StreamEvent(position.encode(), event.event, event.data))

    async def _follow_runs(
        self,
        thread_id: str,
        start: _Start,
        position: Cursor,
        queue: asyncio.Queue[_Queued],
        modes: ThreadStreamModes,
    ) -> None:
        """Each run of the thread in turn, then a run_done marker; None once the thread is gone.

        A stream that starts where the thread's shared follower is (see `_shared_runs`) takes
        its runs from it; once it falls behind or the follower ends, it goes on alone from
        where it is."""
        anchor, first = start
        mark = (anchor, first[0].run_id, first[1]) if first is not None else (anchor, None, None)
        joined = self.fanouts.join(
            thread_id, mark, lambda fanout: self._shared_runs(thread_id, start, fanout)
        )
        if joined is not None:
            async with joined as member:
                while (items := await member.take()) is not None:
                    batch: list[StreamEvent] = []
                    for run_id, event_id, event in items:
                        position.run_id, position.event_id = run_id, event_id
                        if not modes.delivers(event.event):
                            continue
                        if position.state_id is None:
                            batch.append(event)  # its id is this stream's position
                        else:
                            batch.append(StreamEvent(position.encode(), event.event, event.data))
                    if batch:
                        await queue.put(batch)
                        # What comes meanwhile goes out with the next write: the thread's streams
                        # here write about SHARED_WRITES_PER_SECOND times a second together, however
                        # many they are and however fast its runs come.
                        pause = member.sharing() / SHARED_WRITES_PER_SECOND
                        await asyncio.sleep(min(pause, MAX_WRITE_PAUSE_SECONDS))
            if position.run_id is not None:
                resumed = Cursor(position.run_id, position.event_id)
                start = await self._starting_point(thread_id, resumed)
        await self._follow_runs_alone(thread_id, start, position, queue, modes)

    async def _shared_runs(self, thread_id: str, start: _Start, fanout: Fanout[SharedItem]) -> None:
        """The thread's runs from `start`, read once for every stream of the thread here that
        starts at the same place (live joins of an idle thread, mostly). Its position is where
        it waits for the next run, so a stream joining later shares it only from there."""
        anchor, first = start
        async with self.run_arrivals.watch(thread_id) as arrivals:
            if first is not None:
                fanout.position = BUSY
                run, after = first
                anchor = await self._share_run(run, after, fanout)
            while True:
                fanout.position = (anchor, None, None)
                upcoming = await arrivals.after(anchor, 1)
                fanout.position = BUSY
                if upcoming is None:
                    return  # the thread was deleted: each stream finds out alone
                anchor = await self._share_run(upcoming[0], None, fanout)

    async def _share_run(
        self, run: RunRecord, after: str | None, fanout: Fanout[SharedItem]
    ) -> tuple[Any, str]:
        """Hand out one run's events after `after`, then its run_done; returns its anchor."""
        run_id = run.run_id
        async for event in self.waits.run_events(run, after, None, cancel_on_disconnect=False):
            fanout.publish([_shared(run_id, event.id, event.event, event.data)])
        done = json.dumps({"status": "run_done", "run_id": run_id})
        fanout.publish([_shared(run_id, _DONE, "metadata", done)])
        return run.created_at, run_id

    async def _follow_runs_alone(
        self,
        thread_id: str,
        start: _Start,
        position: Cursor,
        queue: asyncio.Queue[_Queued],
        modes: ThreadStreamModes,
    ) -> None:
        """Each run of the thread in turn, read by this stream alone."""
        anchor, first = start
        async with self.run_arrivals.watch(thread_id) as arrivals:
            if first is not None:
                run, after = first
                anchor = await self._stream_run(run, after, position, queue, modes)
            while True:
                upcoming = await arrivals.after(anchor, 1)
                if upcoming is None:
                    await queue.put(None)  # the thread was deleted
                    return
                # A run created after the join has published nothing that was seen: all of it.
                anchor = await self._stream_run(upcoming[0], None, position, queue, modes)

    async def _starting_point(self, thread_id: str, cursor: Cursor | None) -> _Start:
        """Where to start: the anchor after which runs are new, and a run to stream first (with
        the event to resume after) when the stream joins in the middle of one."""
        async with self.autocommit() as session:
            if cursor is not None and cursor.run_id is not None:
                resumed = await runs_db.get_run(session, cursor.run_id, thread_id)
                if resumed is not None:
                    anchor = (resumed.created_at, resumed.run_id)
                    if cursor.event_id == _DONE:
                        return anchor, None
                    return anchor, (resumed, cursor.event_id)
            elif cursor is not None:
                return None, None  # resumed before any run: every run of the thread
            # Joining live (or resuming a run since deleted): the runs still to come.
            active = await runs_db.active_runs(session, thread_id)
            if active:
                run = active[0]
                live = LIVE_ONLY if run.status == RunStatus.RUNNING else None
                return None, (run, live)
            latest = await runs_db.latest_run(session, thread_id)
        return ((latest.created_at, latest.run_id) if latest else None), None

    async def _stream_run(
        self,
        run: RunRecord,
        after: str | None,
        position: Cursor,
        queue: asyncio.Queue[_Queued],
        modes: ThreadStreamModes,
    ) -> tuple[Any, str]:
        """Deliver one run's events after `after`, then its run_done; returns its anchor."""
        run_id = run.run_id
        position.run_id, position.event_id = run_id, after if after != LIVE_ONLY else None
        async for event in self.waits.run_events(run, after, None, cancel_on_disconnect=False):
            position.event_id = event.id
            if not modes.delivers(event.event):
                continue
            await queue.put(StreamEvent(position.encode(), event.event, event.data))
        position.event_id = _DONE
        done = json.dumps({"status": "run_done", "run_id": run_id})
        await queue.put(StreamEvent(position.encode(), "metadata", done))
        return run.created_at, run_id
