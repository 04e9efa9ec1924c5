"""This instance's own record in the database (the `instances` table), for the operator
console: written at start and every heartbeat (slots used, draining), removed at a clean
stop. A killed instance's row stays, with its last heartbeat, until an hour of silence
(the console shows it dead meanwhile).

The beat also carries out a drain an operator asked of this instance from any instance's
console: the request is a mark on the row, read back by the same statement that writes it,
so a drain costs no statement of its own and reaches the instance within a heartbeat.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Callable
from datetime import UTC, datetime

from runyard import __version__
from runyard.db import instances as instances_db
from runyard.db.engine import Sessions
from runyard.loops import every

log = logging.getLogger("runyard.instances")

# A row not written for this long is forgotten (its instance was killed long ago).
FORGET_AFTER_SECONDS = 3600.0


class InstanceRecord:
    """Writes this instance's row every `beat` seconds from what it reads of itself (its
    slots, those in use, whether it drains) and calls `drain` once when an operator asked."""

    def __init__(
        self,
        autocommit: Sessions,
        instance_id: str,
        beat: float,
        slots: Callable[[], int],
        used: Callable[[], int],
        draining: Callable[[], bool],
        drain: Callable[[], None],
    ) -> None:
        self._autocommit = autocommit
        self.instance_id = instance_id
        self._beat = beat
        self._slots = slots
        self._used = used
        self._draining = draining
        self._drain = drain
        self._started_at = datetime.now(UTC)
        self._host = socket.gethostname()
        self._beats = 0
        self._failing = False

    async def _write_quietly(self) -> None:
        """A beat whose failure (the database unreachable, say) is one warning line when it
        starts failing, not a traceback every beat: the console's view only."""
        try:
            await self.write()
        except Exception as exc:
            if not self._failing:
                log.warning(
                    "instance_record_failed instance=%s error=%s",
                    self.instance_id,
                    type(exc).__name__,
                )
            self._failing = True
        else:
            self._failing = False

    async def write(self) -> None:
        """One beat: write the row; start draining if an operator asked."""
        async with self._autocommit() as session:
            asked_by = await instances_db.beat(
                session,
                self.instance_id,
                self._host,
                __version__,
                self._started_at,
                self._slots(),
                self._used(),
                self._draining(),
            )
            self._beats += 1
            # Once in a while (every ~100 beats), not every beat: forgetting is not urgent.
            if self._beats % 100 == 1:
                await instances_db.forget_silent(session, FORGET_AFTER_SECONDS)
        if asked_by is not None and not self._draining():
            log.info("instance_drain_requested instance=%s by=%s", self.instance_id, asked_by)
            self._drain()

    async def run_forever(self, stop: asyncio.Event) -> None:
        """Write the row every beat until `stop` is set, then remove it."""
        await every(self._beat, stop, self._write_quietly, log, "instance_record_failed")
        try:
            async with asyncio.timeout(self._beat * 2):
                async with self._autocommit() as session:
                    await instances_db.remove(session, self.instance_id)
        except Exception:
            log.warning("instance_record_not_removed instance=%s", self.instance_id)
