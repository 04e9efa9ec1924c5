"""A thread's next runs, looked for once per interval per thread, whatever the number of
streams following the thread in this process.

Thread streams and sessions follow a thread's runs in creation order; once they have
delivered the last one, they wait for the next. Each used to poll the database on its own,
four times a second: three hundred streams on one thread (clients that subscribe and never
read among them) sent twelve hundred statements a second and slowed every run of the
instance. Here the streams of a thread share one look: `RunArrivals.watch` gives a stream a
membership for as long as it lives, and `ThreadWatch.after` answers from the runs the
thread's one poller has found, or waits for the next ones.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from runyard.db import runs as runs_db
from runyard.db import threads as threads_db
from runyard.domain.run import RunRecord

log = logging.getLogger("runyard.threads")

# How often a followed thread is looked at for new runs, and checked to still exist.
POLL_SECONDS = 0.25
THREAD_CHECK_SECONDS = 5.0
# New runs a poll reads at most, and how many found runs a watch keeps for late members.
_PAGE = 50
_KEPT = 500

Anchor = tuple[Any, str]
Sessions = Callable[[], AbstractAsyncContextManager[AsyncConnection]]


def anchor_of(run: RunRecord) -> Anchor:
    """The (created_at, run_id) position of a run: runs after it are newer."""
    return (run.created_at, run.run_id)


class ThreadWatch:
    """One thread's new runs as its poller finds them, shared by its members."""

    def __init__(self, thread_id: str) -> None:
        self.thread_id = thread_id
        self.members = 0
        self.gone = False
        self.error: BaseException | None = None
        self.task: asyncio.Task[None] | None = None
        # Found runs lie after `base`; None until a member has said where it waits.
        self._base: Anchor | None = None
        self._based = False
        self._rows: list[RunRecord] = []
        self._index: dict[Anchor, int] = {}
        self._changed = asyncio.Event()

    def newest(self) -> tuple[bool, Anchor | None]:
        """Whether the watch knows where to look from, and the anchor to look after."""
        if self._rows:
            return True, anchor_of(self._rows[-1])
        return self._based, self._base

    def cached_after(self, anchor: Anchor | None, limit: int) -> list[RunRecord] | None:
        """Found runs after `anchor`; None when the watch cannot tell (ask the database)."""
        if not self._based:
            return None
        if anchor == self._base:
            return self._rows[:limit]
        position = self._index.get(anchor) if anchor is not None else None
        if position is None:
            return None
        return self._rows[position + 1 : position + 1 + limit]

    def base_on(self, anchor: Anchor | None) -> None:
        """Start finding runs after `anchor` (the first waiting member's position)."""
        if not self._based:
            self._based, self._base = True, anchor

    def found(self, rows: Sequence[RunRecord]) -> None:
        """Runs the poller found after the newest one: keep them, wake the members."""
        for row in rows:
            self._index[anchor_of(row)] = len(self._rows)
            self._rows.append(row)
        if len(self._rows) > _KEPT:
            drop = len(self._rows) - _KEPT // 2
            self._base = anchor_of(self._rows[drop - 1])
            self._rows = self._rows[drop:]
            self._index = {anchor_of(row): i for i, row in enumerate(self._rows)}
        self.wake()

    def wake(self) -> None:
        """Wake every member waiting for a change."""
        self._changed.set()
        self._changed = asyncio.Event()

    async def changed(self) -> None:
        """Wait for the next change (new runs, the thread gone, a failed poll)."""
        await self._changed.wait()


class RunArrivals:
    """Every followed thread's watch in this process, each polled by one task while it has
    members."""

    def __init__(
        self,
        sessions: Sessions,
        poll_seconds: float = POLL_SECONDS,
        check_seconds: float = THREAD_CHECK_SECONDS,
    ) -> None:
        self._sessions = sessions
        self._poll = poll_seconds
        self._check = check_seconds
        self._watches: dict[str, ThreadWatch] = {}

    def watching(self) -> int:
        """How many threads are watched now."""
        return len(self._watches)

    @asynccontextmanager
    async def watch(self, thread_id: str) -> AsyncIterator[Follower]:
        """Membership of the thread's watch for the caller's lifetime (a stream's)."""
        watch = self._watches.get(thread_id)
        if watch is None or watch.error is not None:
            watch = self._watches[thread_id] = ThreadWatch(thread_id)
            watch.task = asyncio.create_task(self._poll_forever(watch), name="run-arrivals")
        watch.members += 1
        try:
            yield Follower(self._sessions, watch)
        finally:
            watch.members -= 1
            if watch.members == 0:
                if self._watches.get(thread_id) is watch:
                    del self._watches[thread_id]
                if watch.task is not None:
                    watch.task.cancel()
                    await asyncio.gather(watch.task, return_exceptions=True)

    async def stop(self) -> None:
        """Stop every poller (at shutdown; their members end with their streams)."""
        tasks = [w.task for w in self._watches.values() if w.task is not None]
        self._watches.clear()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _poll_forever(self, watch: ThreadWatch) -> None:
        idle = 0.0
        try:
            while True:
                await asyncio.sleep(self._poll)
                idle += self._poll
                based, newest = watch.newest()
                if not based:
                    continue  # nobody waits yet: every member is still streaming a run
                async with self._sessions() as session:
                    rows = await runs_db.runs_created_after(session, watch.thread_id, newest, _PAGE)
                    if not rows and idle >= self._check:
                        idle = 0.0
                        watch.gone = await threads_db.get_thread(session, watch.thread_id) is None
                if rows:
                    idle = 0.0
                    watch.found(rows)
                elif watch.gone:
                    watch.wake()
                    return
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            # The members see it (as when each polled alone); the next member starts anew.
            log.warning("run_arrivals_poll_failed thread_id=%s error=%r", watch.thread_id, exc)
            watch.error = exc
            watch.wake()


class Follower:
    """A stream's membership of its thread's watch."""

    def __init__(self, sessions: Sessions, watch: ThreadWatch) -> None:
        self._sessions = sessions
        self._watch = watch

    async def after(self, anchor: Anchor | None, limit: int) -> list[RunRecord] | None:
        """The thread's runs created after `anchor` (oldest first, at most `limit`),
        waiting until there is one; None once the thread is gone."""
        watch = self._watch
        while True:
            if watch.error is not None:
                raise watch.error
            rows = watch.cached_after(anchor, limit)
            if rows is None:
                async with self._sessions() as session:
                    rows = list(
                        await runs_db.runs_created_after(session, watch.thread_id, anchor, limit)
                    )
                if not rows:
                    watch.base_on(anchor)
                    rows = watch.cached_after(anchor, limit)
            if rows:
                return rows
            if watch.gone:
                return None
            await watch.changed()
