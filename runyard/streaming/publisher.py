"""Publishes a run's events in order without making the graph wait for each round trip."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from runyard.streaming.broker import EventBroker

# Events waiting beyond this make the graph wait for the batch in flight (back-pressure).
MAX_PENDING = 1000


class EventPublisher:
    """One run attempt's events: sent at once when nothing is in flight, otherwise gathered
    while the previous batch travels and sent together in the next one.

    Order is kept (one batch in flight at a time). A refusal (a newer attempt holds the
    run: StaleAttemptError) surfaces at the next `send` or at `flush`.
    """

    def __init__(self, broker: EventBroker, run_id: str, attempt: int) -> None:
        self._broker = broker
        self._run_id = run_id
        self._attempt = attempt
        self._pending: list[tuple[str, str]] = []
        self._in_flight: asyncio.Task[None] | None = None
        self._error: BaseException | None = None

    async def send(self, event: str, data: str) -> None:
        """Queue one event (never reordered), starting a batch if none is in flight."""
        if self._error is not None:
            raise self._error
        self._pending.append((event, data))
        if self._in_flight is None or self._in_flight.done():
            self._in_flight = asyncio.create_task(self._drain(), name=f"events:{self._run_id}")
        elif len(self._pending) >= MAX_PENDING:
            await asyncio.shield(self._in_flight)

    async def flush(self) -> None:
        """Wait until every queued event is published; raise the refusal, if any."""
        if self._in_flight is not None:
            await asyncio.shield(self._in_flight)
        if self._error is not None:
            raise self._error

    async def _drain(self) -> None:
        while self._pending:
            batch, self._pending = self._pending, []
            try:
                await self._broker.publish_batch(self._run_id, batch, self._attempt)
            except Exception as exc:
                self._error = exc
                self._pending.clear()
                return
