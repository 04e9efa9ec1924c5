"""The webhook outbox's statements against a real database (SQLite and PostgreSQL): a
delivery is claimed by one instance at a time, only once its lease or backoff has passed;
an attempt that lost its claim cannot record an outcome; ended deliveries are pruned."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from runyard.db import webhooks as webhooks_db
from runyard.db.engine import Sessions, session_factory
from runyard.domain.status import DeliveryStatus
from tests.support.databases import migrated_engine

PAYLOAD = {"run_id": "r1", "status": "success", "values": {"n": 1}}


@pytest.fixture(params=["sqlite", "postgres"])
async def sessions(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Sessions]:
    async with migrated_engine(request.param, tmp_path) as engine:
        yield session_factory(engine, autocommit=True)


async def claim(sessions: Sessions, owner: str) -> list[dict[str, object]]:
    async with sessions() as session:
        return await webhooks_db.claim_due(session, owner, 0.3, 10)


async def test_a_delivery_is_claimed_again_only_after_its_lease(sessions: Sessions) -> None:
    async with sessions() as session:
        assert await webhooks_db.insert_claimed(
            session, "msg_r1", "r1", "https://hooks.example.com/", PAYLOAD, "a", 0.3
        )
        # Written once: a second end of the same run records nothing more.
        assert not await webhooks_db.insert_claimed(
            session, "msg_r1", "r1", "https://hooks.example.com/", PAYLOAD, "a", 0.3
        )
    assert await claim(sessions, "b") == []  # `a` holds it
    await asyncio.sleep(0.5)
    first, second = await asyncio.gather(claim(sessions, "b"), claim(sessions, "c"))
    (row,) = first + second  # one claimer wins
    assert row["attempts"] == 2 and row["payload"] == PAYLOAD
    winner = str(row["owner"])
    async with sessions() as session:
        # `a`'s attempt 1 lost the delivery: its outcome is refused.
        assert not await webhooks_db.end_attempt(
            session, "msg_r1", "a", 1, DeliveryStatus.DELIVERED, "HTTP 200"
        )
        # The winner's attempt fails and asks for a retry in 0.3 s.
        assert await webhooks_db.end_attempt(
            session, "msg_r1", winner, 2, DeliveryStatus.PENDING, "HTTP 503", 0.3
        )
    assert await claim(sessions, "b") == []  # not due yet
    await asyncio.sleep(0.5)
    (retry,) = await claim(sessions, "b")
    assert retry["attempts"] == 3 and retry["last_error"] == "HTTP 503"
    async with sessions() as session:
        assert await webhooks_db.end_attempt(
            session, "msg_r1", "b", 3, DeliveryStatus.DELIVERED, "HTTP 200"
        )
        ended = await webhooks_db.get_delivery(session, "msg_r1")
        assert ended is not None
        assert (ended["status"], ended["owner"]) == ("delivered", None)
    await asyncio.sleep(0.5)
    assert await claim(sessions, "b") == []  # ended: never claimed again
    async with sessions() as session:
        await webhooks_db.delete_ended(session, 3600.0)
        assert await webhooks_db.get_delivery(session, "msg_r1") is not None
        await webhooks_db.delete_ended(session, 0.1)
        assert await webhooks_db.get_delivery(session, "msg_r1") is None
