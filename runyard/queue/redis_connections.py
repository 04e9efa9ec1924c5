"""An instance's Redis connections, in three budgets that cannot starve one another.

- `blocking`: the stream reader's (its pub/sub listener and RUNYARD_REDIS_STREAM_READERS
  fetch loops), each worker loop's BLPOP (WORKER_COUNT) and the notification listener's
  pub/sub (one).
- `worker`: what executing runs write: event appends, run ends, completion signals
  (RUNYARD_REDIS_WORKER_CONNECTIONS).
- `requests`: the request path: queue pushes, cancels, replays of stored events, health
  (RUNYARD_REDIS_REQUEST_CONNECTIONS).

Each pool makes a caller wait when all its connections are busy until one is released, in
the order they came (every command has a socket timeout, so none is held for long): a full
pool is backpressure, never an error that could be taken for Redis being away. Each
connection is named `<prefix><budget>`, so `CLIENT LIST` shows what each instance holds.
"""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass
from typing import Any

from redis.asyncio import ConnectionPool, Redis
from redis.asyncio.connection import AbstractConnection

# Connections of the blocking budget beyond the stream reader's fetch loops and the worker
# loops: the stream reader's and the notification listener's pub/sub, and a spare.
BLOCKING_EXTRA = 3


@dataclass
class RedisConnections:
    """The three clients; close them with `aclose`."""

    blocking: Redis
    worker: Redis
    requests: Redis

    @classmethod
    def open(
        cls,
        url: str,
        prefix: str,
        *,
        stream_readers: int,
        worker_loops: int,
        worker_connections: int,
        request_connections: int,
    ) -> RedisConnections:
        """Build the three pools (no connection is made before the first command)."""
        blocking = stream_readers + worker_loops + BLOCKING_EXTRA
        return cls(
            blocking=_client(url, f"{prefix}blocking", blocking),
            worker=_client(url, f"{prefix}worker", worker_connections),
            requests=_client(url, f"{prefix}requests", request_connections),
        )

    async def aclose(self) -> None:
        """Close every pool."""
        for client in (self.blocking, self.worker, self.requests):
            await client.aclose()


class WaitingConnectionPool(ConnectionPool):
    """A pool of at most `max_connections` whose callers wait for a free one, first come
    first served, instead of failing with MaxConnectionsError.

    redis-py's BlockingConnectionPool does the same behind a lock, a timeout scope and
    metrics on every command, about a third more CPU per command than taking a free
    connection as this does; it waits only when there is none.
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._waiting: deque[asyncio.Future[None]] = deque()

    async def get_connection(self, *args: Any, **kwargs: Any) -> AbstractConnection:
        if self._waiting or not self.can_get_connection():
            await self._wait_turn()
        connection = self.get_available_connection()
        try:
            await self.ensure_connection(connection)
        except BaseException:
            await self.release(connection)
            raise
        return connection

    async def _wait_turn(self) -> None:
        """Until this caller may take a connection (queued last, or first if it was woken
        and found the connection taken)."""
        queued = False
        while True:
            turn = asyncio.get_running_loop().create_future()
            if queued:
                self._waiting.appendleft(turn)
            else:
                self._waiting.append(turn)
            queued = True
            try:
                await turn
            except BaseException:
                if turn.done() and not turn.cancelled():
                    self._wake_next()  # woken, then cancelled: pass the turn on
                elif turn in self._waiting:
                    self._waiting.remove(turn)
                raise
            if self.can_get_connection():
                return

    async def release(self, connection: AbstractConnection) -> None:
        await super().release(connection)
        self._wake_next()

    def _wake_next(self) -> None:
        while self._waiting:
            turn = self._waiting.popleft()
            if not turn.done():
                turn.set_result(None)
                return


def _client(url: str, name: str, size: int) -> Redis:
    pool = WaitingConnectionPool.from_url(
        url,
        max_connections=size,
        client_name=name.replace(" ", "_"),
        socket_connect_timeout=2,
        socket_timeout=15,
        health_check_interval=10,
    )
    return Redis.from_pool(pool)
