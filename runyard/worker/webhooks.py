"""Delivers a finished run to its webhook URL, retried in the background, never blocking."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import httpx

log = logging.getLogger("runyard.webhooks")


class WebhookSender:
    """Owns the delivery tasks and stops them on shutdown."""

    def __init__(self, max_attempts: int, timeout: float = 10.0, *, enabled: bool = True) -> None:
        self._max_attempts = max_attempts
        self._enabled = enabled
        self._client = httpx.AsyncClient(timeout=timeout)
        self._tasks: set[asyncio.Task[None]] = set()

    def send(self, url: str, payload: dict[str, Any]) -> None:
        """Schedule a delivery; returns at once (nothing when `http.disable_webhooks` is set)."""
        if not self._enabled:
            log.info("webhook_skipped run_id=%s reason=disabled", payload.get("run_id"))
            return
        task = asyncio.create_task(
            self._deliver(url, payload), name=f"webhook:{payload.get('run_id')}"
        )
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _deliver(self, url: str, payload: dict[str, Any]) -> None:
        for attempt in range(1, self._max_attempts + 1):
            try:
                response = await self._client.post(url, json=payload)
                if response.status_code < 500:
                    log.info(
                        "webhook_delivered run_id=%s status_code=%s",
                        payload.get("run_id"),
                        response.status_code,
                    )
                    return
                reason = f"HTTP {response.status_code}"
            except httpx.HTTPError as exc:
                reason = f"{type(exc).__name__}: {exc}"
            log.warning(
                "webhook_failed run_id=%s attempt=%s reason=%s",
                payload.get("run_id"),
                attempt,
                reason,
            )
            if attempt < self._max_attempts:
                await asyncio.sleep(min(0.5 * 2 ** (attempt - 1), 10.0))

    async def stop(self, grace: float = 5.0) -> None:
        """Let deliveries in flight finish for a moment, then cancel them."""
        if self._tasks:
            _done, pending = await asyncio.wait(set(self._tasks), timeout=grace)
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
        await self._client.aclose()
