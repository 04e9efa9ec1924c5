"""The webhook policy applied with name resolution: at run and cron creation (every
address the name resolves to must pass) and again at delivery, where the address checked
is the one connected to (so a name that resolves elsewhere later, DNS rebinding, is
refused)."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Awaitable, Callable

from runyard.domain.webhook_policy import (
    WebhookPolicy,
    WebhookRefusedError,
    WebhookTarget,
    check_address,
    check_url,
)

# host, port -> the addresses the name resolves to (textual IPs).
Resolver = Callable[[str, int], Awaitable[list[str]]]
RESOLVE_TIMEOUT_SECONDS = 5.0


async def system_resolver(host: str, port: int) -> list[str]:
    """The machine's resolver (getaddrinfo), as a connection would use it."""
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [str(info[4][0]) for info in infos]


class WebhookGuard:
    """Checks webhook URLs against the policy, resolving names with `resolver`."""

    def __init__(self, policy: WebhookPolicy, resolver: Resolver = system_resolver) -> None:
        self.policy = policy
        self._resolver = resolver

    async def check(self, url: str) -> WebhookTarget:
        """Refuse `url` (WebhookRefusedError, a 422) unless it and every address its host
        resolves to pass the policy."""
        target = check_url(url, self.policy)
        if not target.settled:
            await self.addresses(target)
        return target

    async def addresses(self, target: WebhookTarget) -> list[str]:
        """The addresses to connect to for `target`, each one checked; refused when the
        name does not resolve or any address it resolves to is refused."""
        if target.address is not None:
            return [str(target.address)]
        if target.settled:
            # Listed in allowed_domains: trusted, the operator vouched for the name.
            return await self._resolve(target)
        found = await self._resolve(target)
        for address in found:
            check_address(address, self.policy)
        return found

    async def _resolve(self, target: WebhookTarget) -> list[str]:
        try:
            async with asyncio.timeout(RESOLVE_TIMEOUT_SECONDS):
                found = await self._resolver(target.host, target.port)
        except (OSError, TimeoutError, UnicodeError):
            found = []
        if not found:
            raise WebhookRefusedError(
                f"Webhook host blocked: DNS resolution failed ({target.host}); use a host "
                "name this server can resolve"
            )
        return found
