"""Delivers a finished run to its webhook URL, retried in the background, never blocking.

Every request goes through the URL policy at send time, connected to the checked address
(runyard/outbound/transport.py); redirects are not followed; static headers from
`webhooks.headers` are added; with a signing secret, each delivery is signed as Standard
Webhooks defines it, with a `webhook-id` that stays the same across retries. A delivery
ends in exactly one outcome (delivered, failed, refused): a log line and a metric.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import httpx

from runyard.domain.webhook_policy import WebhookRefusedError, check_url
from runyard.observability.metrics import Metrics
from runyard.outbound.guard import WebhookGuard
from runyard.outbound.signing import signature_headers
from runyard.outbound.transport import GuardedTransport

log = logging.getLogger("runyard.webhooks")

USER_AGENT = "runyard-webhooks"
MAX_BACKOFF_SECONDS = 10.0


@dataclass(frozen=True)
class DeliveryOptions:
    """How deliveries are made: budget, headers, signing key, fields sent."""

    max_attempts: int = 3
    timeout: float = 10.0
    headers: Mapping[str, str] = field(default_factory=dict)
    signing_key: bytes | None = None
    allowed_fields: frozenset[str] | None = None
    enabled: bool = True
    first_backoff: float = 0.5


class WebhookSender:
    """Owns the delivery tasks and stops them on shutdown."""

    def __init__(
        self,
        guard: WebhookGuard,
        options: DeliveryOptions,
        metrics: Metrics | None = None,
        inner: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._options = options
        self._guard = guard
        self._metrics = metrics
        # Redirects are never followed: a 3xx is an answer, and where it points is not checked.
        self._client = httpx.AsyncClient(
            transport=GuardedTransport(guard, inner),
            timeout=options.timeout,
            follow_redirects=False,
            trust_env=False,
        )
        self._tasks: set[asyncio.Task[str]] = set()

    def send(self, url: str, payload: dict[str, Any]) -> None:
        """Schedule a delivery; returns at once (nothing when `http.disable_webhooks` is set)."""
        if not self._options.enabled:
            log.info("webhook_skipped run_id=%s reason=disabled", payload.get("run_id"))
            return
        task = asyncio.create_task(
            self.deliver(url, payload), name=f"webhook:{payload.get('run_id')}"
        )
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def deliver(self, url: str, payload: dict[str, Any]) -> str:
        """Deliver within the retry budget; returns the outcome, never raises (but cancel)."""
        run_id = payload.get("run_id")
        try:
            outcome = await self._attempts(url, payload)
        except asyncio.CancelledError:
            raise
        except WebhookRefusedError as exc:
            log.warning("webhook_refused run_id=%s reason=%s", run_id, exc.message)
            outcome = "refused"
        except Exception:
            log.exception("webhook_failed run_id=%s reason=unexpected", run_id)
            outcome = "failed"
        if self._metrics is not None:
            self._metrics.webhook_deliveries.labels(outcome).inc()
        return outcome

    async def _attempts(self, url: str, payload: dict[str, Any]) -> str:
        run_id = payload.get("run_id")
        # Before httpx parses it: a URL stored under an older policy is refused, not raised.
        check_url(url, self._guard.policy)
        body = self._body(payload)
        message_id = f"msg_{run_id}"
        options = self._options
        for attempt in range(1, options.max_attempts + 1):
            headers = {"content-type": "application/json", "user-agent": USER_AGENT}
            headers.update(options.headers)
            if options.signing_key is not None:
                headers.update(
                    signature_headers(options.signing_key, message_id, int(time.time()), body)
                )
            try:
                response = await self._client.post(url, content=body, headers=headers)
                code = response.status_code
                if code < 300 or 400 <= code < 500:
                    log.info(
                        "webhook_delivered run_id=%s attempt=%s status_code=%s",
                        run_id,
                        attempt,
                        code,
                    )
                    return "delivered"
                if code < 400:
                    log.warning(
                        "webhook_failed run_id=%s attempt=%s reason=redirect_not_followed "
                        "status_code=%s",
                        run_id,
                        attempt,
                        code,
                    )
                    return "failed"
                reason = f"HTTP {code}"
            except httpx.HTTPError as exc:
                reason = f"{type(exc).__name__}: {exc}"
            log.warning(
                "webhook_attempt_failed run_id=%s attempt=%s reason=%s", run_id, attempt, reason
            )
            if attempt < options.max_attempts:
                await asyncio.sleep(
                    min(options.first_backoff * 2 ** (attempt - 1), MAX_BACKOFF_SECONDS)
                )
        log.warning(
            "webhook_failed run_id=%s attempts=%s reason=retries_exhausted",
            run_id,
            options.max_attempts,
        )
        return "failed"

    def _body(self, payload: dict[str, Any]) -> bytes:
        sent = {**payload, "webhook_sent_at": datetime.now(UTC).isoformat()}
        fields = self._options.allowed_fields
        if fields:
            sent = {k: v for k, v in sent.items() if k in fields}
        return json.dumps(sent, separators=(",", ":"), default=str).encode()

    async def stop(self, grace: float = 5.0) -> None:
        """Let deliveries in flight finish for a moment, then cancel them."""
        if self._tasks:
            _done, pending = await asyncio.wait(set(self._tasks), timeout=grace)
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
        await self._client.aclose()
