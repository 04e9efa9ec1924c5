"""The cancel bus: tells whichever instance executes a run to stop it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from runyard.domain.status import CancelAction

# Stops a run executing here (run id, the stop): True when it did.
CancelHandler = Callable[[str, CancelAction], bool]


class CancelBus(Protocol):
    """Delivers cancel requests (run id, action) to every instance."""

    async def publish(self, run_id: str, action: CancelAction) -> bool:
        """Send a cancel; True only when the instance executing the run (this one or, over
        Redis, another that acknowledged it) stopped it. False leaves the run to the cancel
        flag in the database: no instance executes it, or none answered in time."""
        ...

    async def close(self) -> None:
        """Stop listening."""
        ...


class InProcessCancelBus:
    """Calls the local handler directly: there is only one process."""

    def __init__(self, handler: CancelHandler) -> None:
        self._handler = handler

    async def publish(self, run_id: str, action: CancelAction) -> bool:
        """Cancel the run if it executes here."""
        return self._handler(run_id, action)

    async def close(self) -> None:
        """Nothing to release."""
