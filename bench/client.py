"""The bench's HTTP client: one base URL, or several served round-robin, request by request."""

from __future__ import annotations

import itertools

import httpx


class RoundRobinTransport(httpx.AsyncBaseTransport):
    """Sends each request to the next base URL in turn, as a load balancer without affinity would.

    Requests are built against the first base URL; this rewrites scheme, host, port and path
    prefix to the chosen one. A submit and its join therefore usually reach different
    instances, which is what a client behind a round-robin balancer sees.
    """

    def __init__(self, urls: list[str], limits: httpx.Limits) -> None:
        self._bases = [httpx.URL(url) for url in urls]
        self._turns = itertools.cycle(self._bases)
        self._prefix = self._bases[0].raw_path.rstrip(b"/")
        # trust_env=False: a proxy from the environment must not sit between us and the target.
        self._inner = httpx.AsyncHTTPTransport(limits=limits, trust_env=False)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """Rewrite the request for the next base URL and send it."""
        base = next(self._turns)
        rest = request.url.raw_path
        if self._prefix and rest.startswith(self._prefix):
            rest = rest[len(self._prefix) :]
        request.url = request.url.copy_with(
            scheme=base.scheme,
            host=base.host,
            port=base.port,
            raw_path=base.raw_path.rstrip(b"/") + rest,
        )
        request.headers["Host"] = base.netloc.decode("ascii")
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        """Close every pooled connection."""
        await self._inner.aclose()


def open_client(urls: list[str], connections: int) -> httpx.AsyncClient:
    """An AsyncClient for one base URL, or round-robin over several."""
    limits = httpx.Limits(max_connections=connections, max_keepalive_connections=connections)
    transport = RoundRobinTransport(urls, limits) if len(urls) > 1 else None
    # trust_env=False: a proxy from the environment must not sit between us and the target.
    return httpx.AsyncClient(
        base_url=urls[0],
        timeout=httpx.Timeout(60.0),
        limits=limits,
        transport=transport,
        trust_env=False,
    )
