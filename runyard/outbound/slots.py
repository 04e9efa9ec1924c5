"""How many webhook deliveries an instance sends at once: in all, and to one receiver.

Three hundred runs ending together would otherwise open three hundred connections to one
slow receiver (nine hundred over the retries). An attempt takes its receiver's slot, then one
of the instance's, and waits for both before it connects, in that order, so one slow
receiver's queue holds none of the slots others need.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field


@dataclass
class _Receiver:
    slots: asyncio.Semaphore
    # Attempts holding or waiting for one of its slots: at zero it is forgotten.
    users: int = 0


@dataclass
class DeliverySlots:
    """The bounds on deliveries in flight: `total` in all, `per_receiver` to one receiver
    (scheme, host and port), each attempt waiting its turn."""

    total: int
    per_receiver: int
    _all: asyncio.Semaphore = field(init=False)
    _receivers: dict[str, _Receiver] = field(default_factory=dict, init=False)

    def __post_init__(self) -> None:
        if self.total < 1 or self.per_receiver < 1:
            raise ValueError("delivery bounds must be at least 1")
        self._all = asyncio.Semaphore(self.total)

    @asynccontextmanager
    async def hold(self, receiver: str) -> AsyncIterator[None]:
        """One slot of `receiver` and one of the instance, until the block ends."""
        entry = self._receivers.get(receiver)
        if entry is None:
            entry = self._receivers[receiver] = _Receiver(asyncio.Semaphore(self.per_receiver))
        entry.users += 1
        try:
            async with entry.slots, self._all:
                yield
        finally:
            entry.users -= 1
            if entry.users == 0:
                del self._receivers[receiver]

    @property
    def receivers(self) -> int:
        """Receivers with an attempt sending or waiting (what the bounds keep in memory)."""
        return len(self._receivers)
