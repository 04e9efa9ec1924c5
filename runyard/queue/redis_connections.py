"""An instance's Redis connections, in three budgets that cannot starve one another.

- `blocking`: the stream reader's (its pub/sub listener and RUNYARD_REDIS_STREAM_READERS
  fetch loops), each worker loop's BLPOP (WORKER_COUNT) and the notification listener's
  pub/sub (one).
- `worker`: what executing runs write: event appends, run ends, completion signals
  (RUNYARD_REDIS_WORKER_CONNECTIONS).
- `requests`: the request path: queue pushes, cancels, replays of stored events, health
  (RUNYARD_REDIS_REQUEST_CONNECTIONS).

Each pool blocks a caller when all its connections are busy until one is released (every
command has a socket timeout, so none is held for long): a full pool is backpressure,
never an error that could be taken for Redis being away. Each connection is named
`<prefix><budget>`, so `CLIENT LIST` shows what each instance holds.
"""

from __future__ import annotations

from dataclasses import dataclass

from redis.asyncio import BlockingConnectionPool, Redis

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


def _client(url: str, name: str, size: int) -> Redis:
    pool = BlockingConnectionPool.from_url(
        url,
        max_connections=size,
        timeout=None,
        client_name=name.replace(" ", "_"),
        socket_connect_timeout=2,
        socket_timeout=15,
        health_check_interval=10,
    )
    return Redis.from_pool(pool)
