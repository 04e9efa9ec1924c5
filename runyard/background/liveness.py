"""This instance's liveness in a fleet on PostgreSQL: the advisory lock that tells every other
instance it is alive, held on a connection of its own (runyard/db/liveness.py).

The lock is taken at start, before the worker pool claims a run, and checked every beat.
When its connection is lost while the process lives (the database restarted, the network
cut, the session killed), PostgreSQL has released the lock, or will once it notices: other
instances may take this one's runs over, and fencing refuses its attempts' writes from then
on. So the instance stops claiming runs (a run claimed then would be taken over at once, a
lost attempt) and takes its lock back as soon as it can. Its attempts go on: if no one takes
them over (after a database restart no one does for a lease), they end as usual; if someone
does, their next lease renewal finds it and they stand down.

Held until the worker pool has stopped, so a draining instance's runs are not taken over
while it finishes or hands them back.
"""

from __future__ import annotations

import asyncio
import logging
from enum import StrEnum
from typing import Any

from runyard.db import liveness as liveness_db

log = logging.getLogger("runyard.liveness")


class Liveness(StrEnum):
    """Where this instance's liveness lock stands."""

    # This instance's session holds it.
    HELD = "held"
    # Another session holds its key (a session of this instance that PostgreSQL has not
    # closed yet, or an id that hashes alike): others count this instance as alive.
    ELSEWHERE = "elsewhere"
    # No connection: others may count this instance as gone.
    LOST = "lost"


class InstanceLiveness:
    """Holds this instance's liveness lock; built from the database's libpq URL, the
    instance id, the beat (how often the lock is checked) and the lease duration (how long
    a check may take before the connection counts as lost)."""

    def __init__(self, conninfo: str, instance_id: str, beat: float, lease: float) -> None:
        self._conninfo = conninfo
        self.instance_id = instance_id
        self._beat = beat
        self._lease = lease
        self._connection: Any = None
        self.state = Liveness.LOST
        # Set while this instance counts as alive: the worker pool claims only then.
        self._alive = asyncio.Event()

    async def take(self) -> None:
        """At start: connect and take the lock (raises when the database cannot be reached)."""
        await self._connect_and_take()

    def alive(self) -> bool:
        """True while this instance counts as alive (its lock is held, by it or a twin)."""
        return self._alive.is_set()

    async def until_alive(self) -> None:
        """Return once this instance counts as alive (at once, most of the time)."""
        await self._alive.wait()

    async def run_forever(self, stop: asyncio.Event) -> None:
        """Check the lock every beat, and take it back after a loss, until `stop` is set."""
        while not stop.is_set():
            try:
                await asyncio.wait_for(stop.wait(), self._beat)
                return
            except TimeoutError:
                pass
            await self.check_once()

    async def check_once(self) -> None:
        """One beat: check the lock on its connection; reconnect and take it when lost."""
        try:
            async with asyncio.timeout(self._lease):
                if self._connection is not None:
                    if await liveness_db.holds_lock(self._connection, self.instance_id):
                        self._now(Liveness.HELD)
                        return
                    await self._take_on_connection()
                    return
                await self._connect_and_take()
        except Exception as exc:
            self._drop()
            self._now(Liveness.LOST, error=type(exc).__name__)

    async def close(self) -> None:
        """Release the lock: close its connection (at shutdown, after the worker pool)."""
        connection, self._connection = self._connection, None
        self._alive.clear()
        if connection is not None and not connection.is_closed():
            try:
                await asyncio.wait_for(connection.close(), self._beat)
            except Exception:
                connection.terminate()

    async def _connect_and_take(self) -> None:
        self._drop()
        self._connection = await liveness_db.connect(
            self._conninfo, self.instance_id, self._lease, self._beat, self._closed
        )
        await self._take_on_connection()

    async def _take_on_connection(self) -> None:
        taken = await liveness_db.take_lock(self._connection, self.instance_id)
        self._now(Liveness.HELD if taken else Liveness.ELSEWHERE)

    def _closed(self, connection: Any) -> None:
        """The lock's connection closed: if under this instance (not by `_drop` or `close`),
        the lock is gone or going, so it stops claiming at once rather than at the next
        beat, which takes the lock back."""
        if connection is self._connection:
            self._connection = None
            self._now(Liveness.LOST, error="ConnectionClosed")

    def _drop(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            connection.terminate()

    def _now(self, state: Liveness, error: str | None = None) -> None:
        if state is not self.state:
            level = logging.INFO if state is Liveness.HELD else logging.WARNING
            log.log(
                level,
                "instance_liveness_%s instance=%s error=%s",
                state.value,
                self.instance_id,
                error,
            )
        self.state = state
        if state is Liveness.LOST:
            self._alive.clear()
        else:
            self._alive.set()
