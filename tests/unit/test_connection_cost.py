"""What a connection costs the server before any request: the head-bounded protocol adds a
few counters to uvicorn's, not a dict of its own per connection (an idle stream client
holds its connection for hours, and hundreds of them may)."""

from __future__ import annotations

import tracemalloc
from typing import Any

import pytest
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.server import ServerState

from runyard.app.server import HeadBoundedProtocol, ServerConfig

pytestmark = pytest.mark.timeout(30)
CONNECTIONS = 200
# The counters themselves are seven slots of 8 bytes; what a measure of objects made one
# after another varies by is below this, and a dict of the protocol's own (1.3 KiB) is far above.
ALLOWED_EXTRA_BYTES = 256


async def app(scope: Any, receive: Any, send: Any) -> None:
    """Never called: no request is made."""


def cost(protocol: type[HttpToolsProtocol], config: ServerConfig) -> float:
    """Bytes allocated per connection object of this protocol."""
    state = ServerState()
    protocol(config, state, {})  # what the first object of a class makes once (shared keys)
    tracemalloc.start()
    try:
        kept = [protocol(config, state, {}) for _ in range(CONNECTIONS)]
        allocated = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert len(kept) == CONNECTIONS
    return allocated / CONNECTIONS


async def test_a_head_bounded_connection_costs_what_uvicorns_does() -> None:
    config = ServerConfig(app)
    config.load()
    plain = cost(HttpToolsProtocol, config)
    bounded = cost(HeadBoundedProtocol, config)
    assert bounded <= plain + ALLOWED_EXTRA_BYTES, (bounded, plain)
