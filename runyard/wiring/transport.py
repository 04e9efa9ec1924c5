"""What carries runs and their events: the broker, the run queue and the cancel bus, from the
backend of the instance's kind (`Settings.queue_kind`: `redis` with REDIS_URL, else
`in-process`).

A backend is one entry of TRANSPORTS: a function that opens it from `TransportNeeds` and
returns a `Transport` (runyard/wiring/transport_contract.py) with its broker, queue, cancel
bus, readiness probes, whether instances share it, and the errors that mean what it
connects to is out of reach. The Redis backend is
runyard/wiring/redis_transport.py, imported only when it is used.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from runyard.domain.errors import ConfigError
from runyard.domain.outages import declare_outage_errors
from runyard.queue.cancel_bus import InProcessCancelBus
from runyard.queue.run_queue import InProcessRunQueue
from runyard.streaming.broker import InMemoryEventBroker
from runyard.wiring.transport_contract import Transport, TransportNeeds

OpenTransport = Callable[[TransportNeeds], Awaitable[Transport]]


async def open_in_process_transport(needs: TransportNeeds) -> Transport:
    """The single-process transport (`runyard dev`, or `runyard serve` without Redis)."""
    return Transport(
        InMemoryEventBroker(needs.settings.event_retention_seconds),
        InProcessRunQueue(needs.caps),
        InProcessCancelBus(needs.stop_run),
    )


async def _open_redis(needs: TransportNeeds) -> Transport:
    from runyard.wiring.redis_transport import open_redis_transport

    return await open_redis_transport(needs)


# The backends, by kind.
TRANSPORTS: dict[str, OpenTransport] = {
    "in-process": open_in_process_transport,
    "redis": _open_redis,
}


async def open_transport(needs: TransportNeeds) -> Transport:
    """The transport of the settings' kind, opened."""
    kind = needs.settings.queue_kind
    opener = TRANSPORTS.get(kind)
    if opener is None:
        known = ", ".join(sorted(TRANSPORTS))
        raise ConfigError(f"no transport backend {kind!r}; the backends are {known}")
    transport = await opener(needs)
    declare_outage_errors(*transport.outage_errors)
    return transport
