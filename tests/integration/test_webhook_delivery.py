"""Delivery re-checks the address it connects to: a name the test's resolver answers with a
public address at creation and with 127.0.0.1 at delivery (DNS rebinding) is refused;
redirects are not followed; a delivery that cannot succeed ends with one outcome, never an
exception; deliveries at once are bounded in all and per receiver, and one waiting its turn
past its lease is still sent once. The sender and a real HTTP receiver, with a resolver the
test controls, and the outbox on a real database."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from runyard.db import webhooks as webhooks_db
from runyard.db.engine import Sessions, session_factory
from runyard.domain.webhook_policy import WebhookPolicy, WebhookRefusedError
from runyard.observability.metrics import Metrics
from runyard.outbound.guard import WebhookGuard
from runyard.settings import Settings
from runyard.worker.webhooks import DEFAULT_MAX_PER_RECEIVER, DeliveryOptions, WebhookSender
from tests.support.databases import migrated_engine
from tests.support.server import free_port
from tests.support.webhooks import Concurrency, WebhookReceiver

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


# --- how many deliveries at once ------------------------------------------------------------


async def test_a_burst_of_deliveries_to_one_slow_receiver_is_bounded_by_default(
    receiver: WebhookReceiver,
) -> None:
    """Forty runs ending together to one receiver that takes its time: at most the default
    number of connections to it at once, and every one delivered."""
    receiver.delay = 0.3
    guard = WebhookGuard(WebhookPolicy(disable_loopback=False))
    delivery = WebhookSender(guard, DeliveryOptions(), Metrics(in_flight=lambda: 0))
    try:
        ends = [delivery.deliver(f"{receiver.url}/hook", {"run_id": f"b{n}"}) for n in range(40)]
        assert set(await asyncio.gather(*ends)) == {"delivered"}
    finally:
        await delivery.stop()
    assert len(receiver.received) == 40
    assert receiver.concurrency.peak <= DEFAULT_MAX_PER_RECEIVER < 40
    defaults = Settings(_env_file=None)  # type: ignore[call-arg]
    assert defaults.webhook_max_per_receiver == DEFAULT_MAX_PER_RECEIVER
    assert defaults.webhook_max_concurrent == DeliveryOptions().max_concurrent


async def test_the_instance_bound_spans_receivers() -> None:
    together = Concurrency()
    receivers = [WebhookReceiver(together), WebhookReceiver(together)]
    for one in receivers:
        one.delay = 0.2
        one.start()
    guard = WebhookGuard(WebhookPolicy(disable_loopback=False))
    options = DeliveryOptions(max_concurrent=3, max_per_receiver=2)
    delivery = WebhookSender(guard, options, Metrics(in_flight=lambda: 0))
    try:
        ends = [
            delivery.deliver(f"{one.url}/hook", {"run_id": f"s{n}"})
            for n in range(10)
            for one in receivers
        ]
        assert set(await asyncio.gather(*ends)) == {"delivered"}
    finally:
        await delivery.stop()
        for one in receivers:
            one.stop()
    assert all(one.concurrency is together for one in receivers)
    assert together.peak == 3
    assert delivery.slots.receivers == 0  # nothing kept for receivers no longer sent to


@pytest.fixture(params=["sqlite", "postgres"])
async def sessions(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Sessions]:
    async with migrated_engine(request.param, tmp_path) as engine:
        yield session_factory(engine, autocommit=True)


async def test_deliveries_waiting_their_turn_past_the_lease_are_sent_once(
    sessions: Sessions, receiver: WebhookReceiver
) -> None:
    """The outbox's deliveries wait for a slot with their lease renewed: none is claimed
    again (and sent twice) while it waits, however long the queue to its receiver."""
    receiver.delay = 0.4
    guard = WebhookGuard(WebhookPolicy(disable_loopback=False))
    # A lease of 6 s (timeout + 5), and eighteen deliveries of 0.4 s each, one at a time.
    options = DeliveryOptions(max_attempts=1, timeout=1.0, max_per_receiver=1, poll_interval=0.2)
    delivery = WebhookSender(guard, options, sessions=sessions, owner="instance-a")
    stop = asyncio.Event()
    outbox = asyncio.create_task(delivery.run_forever(stop))
    run_ids = [f"q{n}" for n in range(18)]
    try:
        for run_id in run_ids:
            async with sessions() as session:
                await delivery.record(session, f"{receiver.url}/hook", {"run_id": run_id})
            delivery.start(run_id)
        for run_id in run_ids:
            await receiver.wait_for(run_id, timeout=60)
        await asyncio.sleep(2 * options.poll_interval)  # time for a second claim to show
    finally:
        stop.set()
        await outbox
        await delivery.stop()
    sent = sorted(body["run_id"] for _path, body in receiver.received)
    assert sent == sorted(run_ids)
    assert receiver.concurrency.peak == 1
    async with sessions() as session:
        for run_id in run_ids:
            row = await webhooks_db.get_delivery(session, f"msg_{run_id}")
            assert row is not None and (row["status"], row["attempts"]) == ("delivered", 1)
