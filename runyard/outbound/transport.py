"""An httpx transport that connects only to an address the webhook policy allows.

The name is resolved here, at send time, every address is checked, and the connection
goes to the checked address itself (the Host header and TLS server name keep the name), so
what was checked is what is connected to: a name that resolved to a public address when
the run was created and resolves to 127.0.0.1 now is refused (DNS rebinding).
"""

from __future__ import annotations

import httpx

from runyard.domain.webhook_policy import check_url
from runyard.outbound.guard import WebhookGuard


class GuardedTransport(httpx.AsyncBaseTransport):
    """Checks each request's URL and resolved address, then sends it pinned to that address."""

    def __init__(self, guard: WebhookGuard, inner: httpx.AsyncBaseTransport | None = None) -> None:
        self._guard = guard
        # No connection is kept: a pooled one is keyed by address, and would carry a request
        # for another name (TLS checked for the first) to the same address.
        self._inner = inner or httpx.AsyncHTTPTransport(
            limits=httpx.Limits(max_keepalive_connections=0), trust_env=False
        )

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """Refuse (WebhookRefusedError) or send to the first checked address."""
        target = check_url(str(request.url), self._guard.policy)
        address = (await self._guard.addresses(target))[0]
        extensions = dict(request.extensions)
        if target.scheme == "https":
            extensions["sni_hostname"] = request.url.host
        pinned = httpx.Request(
            request.method,
            request.url.copy_with(host=address),
            headers=request.headers,
            stream=request.stream,
            extensions=extensions,
        )
        return await self._inner.handle_async_request(pinned)

    async def aclose(self) -> None:
        """Close the pooled connections."""
        await self._inner.aclose()
