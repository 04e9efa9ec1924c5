"""How the lifecycle's transitions run: each in one transaction (the thread row locked first
when asked), serialized within the process on SQLite, and run again when it lost to a
concurrent one. The lock order they keep is written down in runyard/lifecycle/machine.py."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import TypeVar

from sqlalchemy.ext.asyncio import AsyncConnection

from runyard.db import threads as threads_db
from runyard.db.contention import lost_to_contention
from runyard.db.engine import Sessions
from runyard.domain.errors import ConflictError

log = logging.getLogger("runyard.lifecycle")
T = TypeVar("T")

# How many times a transition that lost to a concurrent one (deadlock) is run again.
CONTENTION_RETRIES = 5


class Transactions:
    """Runs transitions for the lifecycle; built from its two session factories and the
    database's dialect."""

    def __init__(self, sessions: Sessions, autocommit: Sessions, dialect: str) -> None:
        self._sessions = sessions
        self._autocommit = autocommit
        # SQLite has one writer: the transitions of this process take turns.
        self.serial = asyncio.Lock() if dialect != "postgresql" else None

    @asynccontextmanager
    async def _serialized(self) -> AsyncIterator[None]:
        if self.serial is None:
            yield
        else:
            async with self.serial:
                yield

    async def transaction(
        self, work: Callable[[AsyncConnection], Awaitable[T]], thread_id: str | None = None
    ) -> T:
        """`work(session)` in one transaction, serialized with the other transitions; with
        `thread_id`, the thread row is locked first. Run again when it lost to another."""
        return await self._retrying(lambda: self._in_transaction(work, thread_id))

    async def _in_transaction(
        self, work: Callable[[AsyncConnection], Awaitable[T]], thread_id: str | None
    ) -> T:
        async with self._serialized(), self._sessions() as session, session.begin():
            if thread_id is not None:
                await threads_db.get_thread(session, thread_id, lock=True)
            return await work(session)

    async def atomic(self, work: Callable[[AsyncConnection], Awaitable[T]]) -> T:
        """A one-statement transition on PostgreSQL (no BEGIN/COMMIT round trips); on SQLite
        its two statements in one serialized transaction."""
        if self.serial is not None:
            return await self._retrying(lambda: self._in_transaction(work, None))

        async def once() -> T:
            async with self._autocommit() as session:
                return await work(session)

        return await self._retrying(once)

    async def _retrying(self, call: Callable[[], Awaitable[T]]) -> T:
        attempt = 1
        while True:
            try:
                return await call()
            except Exception as exc:
                if not lost_to_contention(exc):
                    raise
                if attempt >= CONTENTION_RETRIES:
                    raise ConflictError(
                        f"the thread's runs were changed concurrently {attempt} times while "
                        "this request tried to change them; send it again"
                    ) from exc
                log.warning("transition_retried reason=contention attempt=%s", attempt)
            await asyncio.sleep(0.01 * attempt)
            attempt += 1
