"""A webhook delivery owed by an instance that is SIGKILLed mid-delivery is made by another
instance, once: two `runyard serve` instances on PostgreSQL and Redis, a receiver that
holds the first attempt open (the attempt dies with its instance)."""

from __future__ import annotations

import asyncio
import threading
import uuid

import pytest

from tests.chaos.cluster import ClusterFactory, wait_until
from tests.support.webhooks import WebhookReceiver


@pytest.mark.slow
@pytest.mark.timeout(120)
async def test_a_delivery_owed_by_a_killed_instance_is_made_by_another_once(
    cluster_factory: ClusterFactory, receiver: WebhookReceiver
) -> None:
    receiver.hold = threading.Event()
    cluster = await cluster_factory(1, RUNYARD_WEBHOOK_SECRET="whsec_" + "QUJD" * 8)
    (owing,) = cluster.instances
    # Started first, executing no run: the delivery is owed by `owing` alone.
    other = await asyncio.to_thread(cluster.add, WORKER_COUNT="0")
    thread_id = str(uuid.uuid4())
    created = await owing.http.post(
        f"/threads/{thread_id}/runs",
        json={
            "assistant_id": "short",
            "input": {"delay": 0.01},
            "if_not_exists": "create",
            "webhook": f"{receiver.url}/hook",
        },
    )
    assert created.status_code == 200, created.text
    run_id = created.json()["run_id"]
    # The owing instance's first attempt reaches the receiver, which holds it open.
    await wait_until(lambda: len(receiver.requests) == 1, 30, "the first attempt")
    owing.kill()
    receiver.hold.set()

    _path, body = await receiver.wait_for(run_id, timeout=60)
    assert body["status"] == "success"
    await asyncio.sleep(3)  # nothing more arrives
    assert [b["run_id"] for _p, b in receiver.received] == [run_id]
    ids = {headers["webhook-id"] for _p, headers, _raw in receiver.requests}
    assert ids == {f"msg_{run_id}"}  # a receiver can tell the two attempts are one delivery
    rows = cluster.sql(
        "SELECT status, attempts, owner FROM webhook_deliveries WHERE run_id = %s", run_id
    )
    assert rows == [("delivered", 2, None)], rows
    log = other.server.log_path.read_text()
    assert f"webhook_delivered run_id={run_id} attempts=2" in log, cluster.tails()
