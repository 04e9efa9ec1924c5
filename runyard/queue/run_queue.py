"""The job queue protocol and its in-process implementation (dev mode).

Order: the fairness groups with runs waiting take turns, one run each (deficit round robin
with every group's quantum one run: langgraph-sdk 0.4.14, whose Priority API this follows,
has no fairness weight, so this is round robin); within a group, by priority (-5 first .. 5
last), then first come first served. A run's priority and group are its thread's
(runyard/services/run_priority.py).

Caps (runyard/domain/group_caps.py): a run popped from a capped group holds the group
until its claim is decided (`settle`), so one claim of the group is in flight at a time; a
claim refused by a cap holds the group for a while (`hold`): the run goes back to the place
it was popped from, and the group passes its turns on until the hold ends, so workers do
not pop and bounce its backlog.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections import OrderedDict, deque
from typing import Protocol

from runyard.domain.group_caps import PROBE_SECONDS, GroupCaps
from runyard.domain.priority import DEFAULT_FAIRNESS_GROUP, DEFAULT_PRIORITY


class RunQueue(Protocol):
    """Carries run ids from the API to worker loops; the database stays the truth."""

    async def push(
        self,
        run_id: str,
        delay: float = 0.0,
        priority: int = DEFAULT_PRIORITY,
        group: str = DEFAULT_FAIRNESS_GROUP,
    ) -> None:
        """Make the run available to workers, now or after `delay` seconds: in its fairness
        `group`, ahead of every run of a higher `priority` number."""
        ...

    async def pop(self, timeout: float) -> str | None:
        """The next run id, or None after `timeout` seconds without one."""
        ...

    async def hold(self, run_id: str, group: str, priority: int, seconds: float) -> None:
        """Put a popped run held back by a cap back at its place in `group` (at `priority`,
        as new, when the place is not known) and skip the group for `seconds`."""
        ...

    async def settle(self, run_id: str) -> None:
        """The claim of a popped run is decided (taken, or not claimable): the next run of
        its group, if capped, may be popped."""
        ...

    async def lift(self, group: str) -> None:
        """A run of `group` ended: end a hold a refused claim set on it (a place may have
        freed), so its next run is tried now rather than when the hold runs out."""
        ...

    async def close(self) -> None:
        """Stop delayed pushes and release resources."""
        ...

    async def queued(self, run_ids: list[str]) -> set[str]:
        """Which of these run ids are waiting in the queue (so the sweeper skips them)."""
        ...

    async def depth(self) -> int:
        """How many run ids wait in the queue now (for the queue depth metric)."""
        ...


# Places of recently popped runs, for a hold to put one back where it was: only needed
# between a pop and its claim, so a bounded number is kept.
PLACES_KEPT = 10_000


class InProcessRunQueue:
    """Per fairness group, a heap of (priority, arrival, run id); the groups with runs take
    turns (see the module) inside the single dev-mode process."""

    def __init__(self, caps: GroupCaps | None = None) -> None:
        self._caps = caps or GroupCaps()
        self._groups: dict[str, list[tuple[int, int, str]]] = {}
        # Groups with runs waiting, the one whose turn it is first.
        self._turns: deque[str] = deque()
        self._ready = 0
        self._arrivals = itertools.count()
        self._poppers: deque[asyncio.Future[None]] = deque()
        # Each delayed push not yet due, with its run id.
        self._timers: dict[asyncio.TimerHandle, str] = {}
        self._waiting: dict[str, int] = {}
        # Held groups: until when (loop time), and the run whose claim holds it (a probe) or
        # None (a claim refused by a cap); the wake-ups at the ends of holds.
        self._held: dict[str, tuple[float, str | None]] = {}
        self._hold_ends: set[asyncio.TimerHandle] = set()
        self._places: OrderedDict[str, tuple[int, int]] = OrderedDict()

    async def push(
        self,
        run_id: str,
        delay: float = 0.0,
        priority: int = DEFAULT_PRIORITY,
        group: str = DEFAULT_FAIRNESS_GROUP,
    ) -> None:
        """Enqueue now, or schedule the enqueue after a delay."""
        self._waiting[run_id] = self._waiting.get(run_id, 0) + 1
        if delay <= 0:
            self._put(run_id, priority, group)
            return
        loop = asyncio.get_running_loop()
        handle: asyncio.TimerHandle

        def fire() -> None:
            self._timers.pop(handle, None)
            self._put(run_id, priority, group)

        handle = loop.call_later(delay, fire)
        self._timers[handle] = run_id

    def _put(self, run_id: str, priority: int, group: str, arrival: int | None = None) -> None:
        heap = self._groups.get(group)
        if heap is None:
            heap = self._groups[group] = []
            self._turns.append(group)
        place = next(self._arrivals) if arrival is None else arrival
        heapq.heappush(heap, (priority, place, run_id))
        self._ready += 1
        self._wake_one()

    def _is_held(self, group: str, now: float) -> bool:
        held = self._held.get(group)
        if held is None:
            return False
        if held[0] <= now:
            del self._held[group]
            return False
        return True

    def _next_group(self) -> str | None:
        """Rotate the turns to the first group not held; None when every one is."""
        if not self._held:
            return self._turns[0] if self._turns else None
        now = asyncio.get_running_loop().time()
        for _ in range(len(self._turns)):
            if not self._is_held(self._turns[0], now):
                return self._turns[0]
            self._turns.rotate(-1)
        return None

    def _take(self) -> str | None:
        """The next run: the first of the group whose turn it is, which then goes last."""
        group = self._next_group()
        if group is None:
            return None
        heap = self._groups[group]
        priority, arrival, run_id = heapq.heappop(heap)
        self._ready -= 1
        if heap:
            self._turns.rotate(-1)
        else:
            del self._groups[group]
            self._turns.popleft()
        self._places[run_id] = (priority, arrival)
        if len(self._places) > PLACES_KEPT:
            self._places.popitem(last=False)
        if self._caps.any and self._caps.of(group).capped:
            self._hold_group(group, PROBE_SECONDS, run_id)
        return run_id

    def _hold_group(self, group: str, seconds: float, probe: str | None) -> None:
        """Skip `group` for `seconds`: for the claim of `probe`, or after a refused claim
        (which replaces a probe's hold, and of two such holds the longer is kept)."""
        loop = asyncio.get_running_loop()
        until = loop.time() + seconds
        held = self._held.get(group)
        if probe is None and held is not None and held[1] is None and until <= held[0]:
            return
        self._held[group] = (until, probe)
        handle: asyncio.TimerHandle

        def end_hold() -> None:
            self._hold_ends.discard(handle)
            self._wake_one()

        handle = loop.call_later(seconds, end_hold)
        self._hold_ends.add(handle)

    def _wake_one(self) -> None:
        while self._poppers:
            popper = self._poppers.popleft()
            if not popper.done():
                popper.set_result(None)
                return

    def _unwait(self, run_id: str) -> None:
        left = self._waiting.get(run_id, 1) - 1
        if left <= 0:
            self._waiting.pop(run_id, None)
        else:
            self._waiting[run_id] = left

    async def pop(self, timeout: float) -> str | None:
        """The next run id (see the module), waiting up to `timeout` for one."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while (run_id := self._take() if self._ready else None) is None:
            left = deadline - loop.time()
            if left <= 0:
                return None
            popper = loop.create_future()
            self._poppers.append(popper)
            try:
                # Not wait_for: on Python 3.11 it can lose a cancellation that lands as the
                # future completes, and a stopping worker loop would go on popping.
                async with asyncio.timeout(left):
                    await popper
            except BaseException as exc:
                if popper.done() and not popper.cancelled() and self._ready:
                    # Woken as the wait ended: the wake-up goes to another popper.
                    self._wake_one()
                if isinstance(exc, TimeoutError):
                    return None
                raise
            finally:
                if popper in self._poppers:
                    self._poppers.remove(popper)
        if self._ready and self._poppers:
            # Another popper may be parked while runs remain: pass the wake-up on.
            self._wake_one()
        self._unwait(run_id)
        return run_id

    async def hold(self, run_id: str, group: str, priority: int, seconds: float) -> None:
        """Back to its place in `group`, which is skipped for `seconds` (see the module)."""
        self._hold_group(group, seconds, None)
        if run_id in self._waiting:
            return
        place = self._places.pop(run_id, None)
        self._waiting[run_id] = 1
        if place is None:
            self._put(run_id, priority, group)
        else:
            self._put(run_id, place[0], group, place[1])

    async def settle(self, run_id: str) -> None:
        """Lift the hold of the run's group if this run's claim held it (see the module)."""
        for group, (_, probe) in self._held.items():
            if probe == run_id:
                del self._held[group]
                self._wake_one()
                return

    async def lift(self, group: str) -> None:
        """End the group's hold if a refused claim set it (see the protocol)."""
        held = self._held.get(group)
        if held is not None and held[1] is None:
            del self._held[group]
            self._wake_one()

    async def queued(self, run_ids: list[str]) -> set[str]:
        """The ids among `run_ids` that are in the queue now (or due to enter it)."""
        return {rid for rid in run_ids if rid in self._waiting}

    async def depth(self) -> int:
        """Run ids ready in the queue, held groups' too (delayed ones not yet due are not
        counted)."""
        return self._ready

    async def close(self) -> None:
        """Cancel pending delayed pushes (their ids no longer count as queued) and the ends
        of holds."""
        for handle, run_id in self._timers.items():
            handle.cancel()
            self._unwait(run_id)
        self._timers.clear()
        for handle in self._hold_ends:
            handle.cancel()
        self._hold_ends.clear()
