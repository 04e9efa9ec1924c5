"""Delivers finished runs to their webhook URLs, durably, never blocking a run's end.

A delivery owed is written to the outbox (`webhook_deliveries`) in the transaction that ends
the run, claimed for its first attempt (made once that commits) by the instance that ended
it; any instance's outbox loop claims the others (a retry that is due, or an attempt whose
instance died, even before its first attempt) with a lease.
Each attempt goes through the URL policy at send time, connected to the checked address
(runyard/outbound/transport.py); redirects are not followed; static headers from
`webhooks.headers` are added; with a signing secret each attempt is signed as Standard
Webhooks defines it, with a `webhook-id` that stays the same across retries. A delivery
ends with exactly one outcome (delivered, failed, refused): a log line, a metric, its row.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import httpx
from sqlalchemy.ext.asyncio import AsyncConnection

from runyard.db import webhooks as webhooks_db
from runyard.db.engine import Sessions
from runyard.domain.status import DeliveryStatus
from runyard.domain.webhook_policy import WebhookRefusedError, check_url
from runyard.observability.metrics import Metrics
from runyard.outbound.guard import WebhookGuard
from runyard.outbound.signing import signature_headers
from runyard.outbound.slots import DeliverySlots
from runyard.outbound.transport import GuardedTransport

log = logging.getLogger("runyard.webhooks")

USER_AGENT = "runyard-webhooks"
MAX_BACKOFF_SECONDS = 60.0
CLAIM_BATCH = 50
# Ended deliveries (their outcome) are kept this long, and looked for this often.
KEEP_ENDED_SECONDS = 7 * 24 * 3600.0
PRUNE_INTERVAL_SECONDS = 3600.0
# How long a recorded delivery waits here for its transaction's commit (then the outbox has it).
OWED_KEPT = 300.0
# Deliveries an instance sends at once, in all and to one receiver (RUNYARD_WEBHOOK_MAX_*).
DEFAULT_MAX_CONCURRENT = 100
DEFAULT_MAX_PER_RECEIVER = 10


@dataclass(frozen=True)
class DeliveryOptions:
    """How deliveries are made: budget, headers, signing key, fields sent, polling, and how
    many at once (in all, and to one receiver)."""

    max_attempts: int = 3
    timeout: float = 10.0
    headers: Mapping[str, str] = field(default_factory=dict)
    signing_key: bytes | None = None
    allowed_fields: frozenset[str] | None = None
    enabled: bool = True
    first_backoff: float = 0.5
    poll_interval: float = 2.0
    max_concurrent: int = DEFAULT_MAX_CONCURRENT
    max_per_receiver: int = DEFAULT_MAX_PER_RECEIVER

    @property
    def lease_seconds(self) -> float:
        """How long an attempt holds its delivery: past the request's own timeout."""
        return self.timeout + 5.0

    def backoff(self, attempt: int) -> float:
        """The wait after failed attempt number `attempt` (1-based)."""
        return float(min(self.first_backoff * 2 ** (attempt - 1), MAX_BACKOFF_SECONDS))


@dataclass(frozen=True)
class Attempt:
    """What one attempt came to: a final status, or pending (to retry) with the reason."""

    status: DeliveryStatus
    reason: str | None = None


class WebhookSender:
    """Owns the outbox loop and the attempts in flight, and stops them on shutdown."""

    def __init__(
        self,
        guard: WebhookGuard,
        options: DeliveryOptions,
        metrics: Metrics | None = None,
        *,
        sessions: Sessions | None = None,
        owner: str = "",
        inner: httpx.AsyncBaseTransport | None = None,
        opener: Callable[[dict[str, Any]], Awaitable[dict[str, Any]]] | None = None,
    ) -> None:
        self._guard = guard
        # Decrypts what encryption.path's JSON handlers encrypted in a stored payload.
        self._opener = opener
        self._options = options
        self._metrics = metrics
        self._sessions = sessions
        self._owner = owner
        # Redirects are never followed: a 3xx is an answer, and where it points is not checked.
        self._client = httpx.AsyncClient(
            transport=GuardedTransport(guard, inner),
            timeout=options.timeout,
            follow_redirects=False,
            trust_env=False,
        )
        self.slots = DeliverySlots(options.max_concurrent, options.max_per_receiver)
        self._tasks: set[asyncio.Task[Any]] = set()
        # The claimed deliveries this instance is attempting (sending, or waiting for a slot):
        # delivery id -> attempt. Their leases are renewed until the outcome is recorded.
        self._held: dict[str, int] = {}
        self._wake = asyncio.Event()
        # Deliveries recorded by a run's ending transaction, until `start` after its commit.
        self._owed: dict[str, tuple[float, dict[str, Any]]] = {}

    async def record(self, session: AsyncConnection, url: str, payload: dict[str, Any]) -> None:
        """In the transaction that ends a run: the delivery owed, claimed by this instance for
        its first attempt, which `start` makes once that transaction committed. An instance
        that dies in between leaves it to whoever claims it when its lease expires."""
        if not self._options.enabled:
            return
        run_id = str(payload.get("run_id"))
        now = time.monotonic()
        # A transaction that recorded and then failed leaves its entry here: let it go.
        for stale in [key for key, (at, _row) in self._owed.items() if now - at > OWED_KEPT]:
            del self._owed[stale]
        delivery_id = f"msg_{run_id}"
        row = {"delivery_id": delivery_id, "run_id": run_id, "url": url, "payload": payload}
        if self._sessions is not None:
            fresh = await webhooks_db.insert_claimed(
                session, delivery_id, run_id, url, payload, self._owner, self._lease
            )
            if not fresh:  # recorded by an earlier end of the same run
                self._owed.pop(run_id, None)
                return
        self._owed[run_id] = (now, {**row, "attempts": 1})

    def start(self, run_id: str) -> None:
        """Once the run's end committed: the first attempt of the delivery `record` wrote
        (nothing when `http.disable_webhooks` is set, or another end recorded it)."""
        if not self._options.enabled:
            log.info("webhook_skipped run_id=%s reason=disabled", run_id)
            return
        owed = self._owed.pop(run_id, None)
        if owed is None:
            return
        row = owed[1]
        if self._sessions is None:
            self._spawn(self.deliver(row["url"], row["payload"]), run_id)
        else:
            self._spawn(self._attempt_claimed(row), run_id)

    async def run_forever(self, stop: asyncio.Event) -> None:
        """The outbox loop: claim due deliveries (retries, and those of lost instances)."""
        assert self._sessions is not None
        pruned_at = renewed_at = time.monotonic()
        while not stop.is_set():
            try:
                async with self._sessions() as session:
                    if time.monotonic() - renewed_at > self._lease / 3:
                        renewed_at = time.monotonic()
                        await webhooks_db.extend_leases(
                            session, self._owner, list(self._held.items()), self._lease
                        )
                    # What this instance cannot send soon is left to the others.
                    room = min(CLAIM_BATCH, self._options.max_concurrent - len(self._held))
                    rows = []
                    if room > 0:
                        rows = await webhooks_db.claim_due(session, self._owner, self._lease, room)
                    if time.monotonic() - pruned_at > PRUNE_INTERVAL_SECONDS:
                        pruned_at = time.monotonic()
                        await webhooks_db.delete_ended(session, KEEP_ENDED_SECONDS)
                for row in rows:
                    self._spawn(self._attempt_claimed(row), str(row["run_id"]))
            except Exception:
                log.warning("webhook_claim_failed owner=%s", self._owner, exc_info=True)
            self._wake.clear()
            waiters = {asyncio.ensure_future(stop.wait()), asyncio.ensure_future(self._wake.wait())}
            try:
                await asyncio.wait(
                    waiters, timeout=self._options.poll_interval, return_when="FIRST_COMPLETED"
                )
            finally:
                for waiter in waiters:
                    waiter.cancel()

    async def deliver(self, url: str, payload: dict[str, Any]) -> str:
        """Deliver within the retry budget in this process, without the outbox; returns the
        outcome, never raises (but cancel)."""
        run_id = str(payload.get("run_id"))
        for attempt in range(1, self._options.max_attempts + 1):
            result = await self.attempt(url, payload, f"msg_{run_id}", run_id, attempt)
            if result.status != DeliveryStatus.PENDING:
                return self._ended(run_id, attempt, result)
            if attempt < self._options.max_attempts:
                await asyncio.sleep(self._options.backoff(attempt))
        return self._ended(run_id, self._options.max_attempts, _exhausted(result))

    async def attempt(
        self, url: str, payload: dict[str, Any], message_id: str, run_id: str, attempt: int
    ) -> Attempt:
        """One POST; never raises (but cancel)."""
        try:
            # Before httpx parses it: a URL stored under an older policy is refused, not raised.
            target = check_url(url, self._guard.policy)
            if self._opener is not None:
                payload = await self._opener(payload)
            body = self._body(payload)
            async with self.slots.hold(f"{target.scheme}://{target.host}:{target.port}"):
                response = await self._client.post(
                    url, content=body, headers=self._headers(message_id, body)
                )
        except asyncio.CancelledError:
            raise
        except WebhookRefusedError as exc:
            return Attempt(DeliveryStatus.REFUSED, exc.message)
        except httpx.HTTPError as exc:
            reason = f"{type(exc).__name__}: {exc}"
            log.warning(
                "webhook_attempt_failed run_id=%s attempt=%s reason=%s", run_id, attempt, reason
            )
            return Attempt(DeliveryStatus.PENDING, reason)
        except Exception as exc:
            log.exception(
                "webhook_attempt_failed run_id=%s attempt=%s reason=unexpected", run_id, attempt
            )
            return Attempt(DeliveryStatus.FAILED, f"{type(exc).__name__}: {exc}")
        code = response.status_code
        if code < 300 or 400 <= code < 500:
            return Attempt(DeliveryStatus.DELIVERED, f"HTTP {code}")
        if code < 400:
            return Attempt(DeliveryStatus.FAILED, f"redirect not followed (HTTP {code})")
        log.warning(
            "webhook_attempt_failed run_id=%s attempt=%s reason=HTTP_%s", run_id, attempt, code
        )
        return Attempt(DeliveryStatus.PENDING, f"HTTP {code}")

    async def _attempt_claimed(self, row: dict[str, Any]) -> None:
        """One attempt of a claimed delivery, and its outcome recorded (fenced)."""
        run_id, number = str(row["run_id"]), int(row["attempts"])
        delivery_id = str(row["delivery_id"])
        if number > self._options.max_attempts:
            # The last attempt's instance was lost before it recorded an outcome.
            result = _exhausted(Attempt(DeliveryStatus.PENDING, "the last attempt was lost"))
        else:
            self._held[delivery_id] = number
            try:
                result = await self.attempt(row["url"], row["payload"], delivery_id, run_id, number)
            finally:
                # Recorded next, or lost with this task: either way no longer renewed here.
                self._held.pop(delivery_id, None)
        retry_in = 0.0
        if result.status == DeliveryStatus.PENDING:
            if number < self._options.max_attempts:
                retry_in = self._options.backoff(number)
            else:
                result = _exhausted(result)
        assert self._sessions is not None
        async with self._sessions() as session:
            held = await webhooks_db.end_attempt(
                session,
                row["delivery_id"],
                self._owner,
                number,
                result.status,
                result.reason,
                retry_in,
            )
        if not held:
            log.warning("webhook_attempt_stale run_id=%s attempt=%s", run_id, number)
        elif result.status == DeliveryStatus.PENDING:
            asyncio.get_running_loop().call_later(retry_in, self._wake.set)
        else:
            self._ended(run_id, number, result)

    def _ended(self, run_id: str, attempts: int, result: Attempt) -> str:
        outcome = result.status.value
        if result.status == DeliveryStatus.DELIVERED:
            log.info(
                "webhook_delivered run_id=%s attempts=%s answer=%s", run_id, attempts, result.reason
            )
        elif result.status == DeliveryStatus.REFUSED:
            log.warning("webhook_refused run_id=%s reason=%s", run_id, result.reason)
        else:
            log.warning(
                "webhook_failed run_id=%s attempts=%s reason=%s", run_id, attempts, result.reason
            )
        if self._metrics is not None:
            self._metrics.webhook_deliveries.labels(outcome).inc()
        return outcome

    def _spawn(self, work: Any, run_id: str) -> None:
        task = asyncio.create_task(work, name=f"webhook:{run_id}")
        self._tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            # Recording the outcome failed (database away): the lease expires, and the
            # delivery is attempted again by whoever claims it.
            log.warning(
                "webhook_outcome_not_recorded task=%s", task.get_name(), exc_info=task.exception()
            )

    @property
    def _lease(self) -> float:
        return self._options.lease_seconds

    def _headers(self, message_id: str, body: bytes) -> dict[str, str]:
        headers = {"content-type": "application/json", "user-agent": USER_AGENT}
        headers.update(self._options.headers)
        if self._options.signing_key is not None:
            stamp = int(time.time())
            headers.update(signature_headers(self._options.signing_key, message_id, stamp, body))
        return headers

    def _body(self, payload: dict[str, Any]) -> bytes:
        sent = {**payload, "webhook_sent_at": datetime.now(UTC).isoformat()}
        fields = self._options.allowed_fields
        if fields:
            sent = {k: v for k, v in sent.items() if k in fields}
        return json.dumps(sent, separators=(",", ":"), default=str).encode()

    async def stop(self, grace: float = 5.0) -> None:
        """Let attempts in flight finish for a moment, then cancel them (their leases
        expire, and another instance, or this one restarted, attempts them again)."""
        if self._tasks:
            _done, pending = await asyncio.wait(set(self._tasks), timeout=grace)
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
        await self._client.aclose()


def _exhausted(result: Attempt) -> Attempt:
    return Attempt(DeliveryStatus.FAILED, f"retries exhausted; last: {result.reason}")
