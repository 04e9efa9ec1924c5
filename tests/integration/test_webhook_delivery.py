"""Delivery re-checks the address it connects to: a name the test's resolver answers with a
public address at creation and with 127.0.0.1 at delivery (DNS rebinding) is refused;
redirects are not followed; a delivery that cannot succeed ends with one outcome, never an
exception. The sender and a real HTTP receiver, with a resolver the test controls."""

from __future__ import annotations

import logging

import pytest

from runyard.domain.webhook_policy import WebhookPolicy, WebhookRefusedError
from runyard.observability.metrics import Metrics
from runyard.outbound.guard import WebhookGuard
from runyard.worker.webhooks import DeliveryOptions, WebhookSender
from tests.support.server import free_port
from tests.support.webhooks import WebhookReceiver

PUBLIC = "93.184.216.34"
NAME = "hooks.runyard.test"


class Resolver:
    """Answers what the test says, as a DNS server under an attacker's control would."""

    def __init__(self, answer: list[str]) -> None:
        self.answer = answer
        self.asked: list[str] = []

    async def __call__(self, host: str, port: int) -> list[str]:
        self.asked.append(host)
        return list(self.answer)


def sender(guard: WebhookGuard, metrics: Metrics, attempts: int = 1) -> WebhookSender:
    """A sender with a short backoff."""
    return WebhookSender(guard, DeliveryOptions(max_attempts=attempts, first_backoff=0.05), metrics)


def port_of(receiver: WebhookReceiver) -> str:
    """The receiver's port."""
    return receiver.url.rsplit(":", 1)[1]


def outcomes(metrics: Metrics, outcome: str) -> float:
    """How many deliveries ended with `outcome`."""
    value = metrics.registry.get_sample_value(
        "runyard_webhook_deliveries_total", {"outcome": outcome}
    )
    return value or 0.0


async def test_a_name_rebound_to_loopback_is_refused_at_delivery(
    receiver: WebhookReceiver,
) -> None:
    resolver = Resolver([PUBLIC])
    guard = WebhookGuard(WebhookPolicy(), resolver)
    url = f"http://{NAME}:{port_of(receiver)}/hook"
    await guard.check(url)  # at creation: a public address, accepted
    resolver.answer = ["127.0.0.1"]
    metrics = Metrics(in_flight=lambda: 0)
    delivery = sender(guard, metrics)
    try:
        assert await delivery.deliver(url, {"run_id": "r1"}) == "refused"
    finally:
        await delivery.stop()
    assert receiver.requests == []
    assert resolver.asked == [NAME, NAME]
    assert outcomes(metrics, "refused") == 1


async def test_one_internal_address_among_public_ones_is_refused(
    receiver: WebhookReceiver,
) -> None:
    guard = WebhookGuard(WebhookPolicy(), Resolver([PUBLIC, "10.0.0.8"]))
    with pytest.raises(WebhookRefusedError, match="private IP range"):
        await guard.check(f"http://{NAME}/hook")


async def test_the_connection_goes_to_the_checked_address(receiver: WebhookReceiver) -> None:
    """The resolver's answer is what is connected to (the machine cannot resolve NAME),
    and the receiver still sees the name in Host."""
    guard = WebhookGuard(WebhookPolicy(disable_loopback=False), Resolver(["127.0.0.1"]))
    metrics = Metrics(in_flight=lambda: 0)
    delivery = sender(guard, metrics)
    url = f"http://{NAME}:{port_of(receiver)}/hook"
    try:
        assert await delivery.deliver(url, {"run_id": "r2"}) == "delivered"
    finally:
        await delivery.stop()
    (path, headers, _raw) = receiver.requests[0]
    assert path == "/hook"
    assert headers["host"] == f"{NAME}:{port_of(receiver)}"
    assert outcomes(metrics, "delivered") == 1


async def test_redirects_are_not_followed(receiver: WebhookReceiver) -> None:
    receiver.failures, receiver.failure_status = 1, 307
    guard = WebhookGuard(WebhookPolicy(disable_loopback=False))
    metrics = Metrics(in_flight=lambda: 0)
    delivery = sender(guard, metrics, attempts=3)
    try:
        assert await delivery.deliver(f"{receiver.url}/hook", {"run_id": "r3"}) == "failed"
    finally:
        await delivery.stop()
    assert [path for (path, _h, _b) in receiver.requests] == ["/hook"]


async def test_undeliverable_webhooks_end_cleanly(caplog: pytest.LogCaptureFixture) -> None:
    guard = WebhookGuard(WebhookPolicy(disable_loopback=False))
    metrics = Metrics(in_flight=lambda: 0)
    delivery = sender(guard, metrics, attempts=2)
    caplog.set_level(logging.INFO, logger="runyard.webhooks")
    try:
        # Stored before a stricter policy, or by an older version: refused, not raised.
        for url in ("http:///nohost", "http://127.0.0.1:9340/a\r\nX-Injected: 1"):
            await delivery.record(None, url, {"run_id": "r4"})  # type: ignore[arg-type]
            delivery.start("r4")
        assert await delivery.deliver(f"http://127.0.0.1:{free_port()}/", {"run_id": "r5"}) == (
            "failed"
        )
    finally:
        await delivery.stop()
    assert outcomes(metrics, "refused") == 2
    assert "webhook_failed run_id=r5 attempts=2 reason=retries exhausted" in caplog.text
    assert "Traceback" not in caplog.text
