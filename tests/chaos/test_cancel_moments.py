"""A cancel ends the run through its own attempt whenever it lands: while the last events
are stored, or while the run is being handed back. Each moment is held open on purpose
(Redis pausing writes, a statement that waits in PostgreSQL), not hit by luck."""

from __future__ import annotations

import asyncio
import signal
import uuid

import pytest

from tests.chaos.cluster import DEFAULT_ENV, Cluster, ClusterFactory, Instance, lines_of, wait_until
from tests.support.throwaway import ThrowawayRedis


def reaped(instance: Instance, run_id: str) -> bool:
    """True when the instance's reaper recovered the run (its attempt had vanished)."""
    text = instance.server.log_path.read_text(errors="replace")
    return any("run_recovered" in line and run_id in line for line in text.splitlines())


def cancel_read_by_renewal(cluster: Cluster, run_id: str) -> bool:
    """True once the cancel is recorded and a lease renewal since has read it back (which
    stops the attempt at once). A renewal moves the lease to its own time plus the lease
    duration; the cancel stamps `updated_at` (both from the database clock)."""
    lease = float(DEFAULT_ENV["LEASE_DURATION_SECONDS"])
    return bool(
        cluster.sql(
            "SELECT 1 FROM runs WHERE run_id = %s AND cancel_action IS NOT NULL "
            "AND lease_expires_at - make_interval(secs => %s) > updated_at",
            run_id,
            lease,
        )
    )


@pytest.mark.slow
@pytest.mark.timeout(120)
async def test_a_cancel_while_the_last_events_are_stored_ends_the_run(
    cluster_factory: ClusterFactory, throwaway_redis: ThrowawayRedis
) -> None:
    """Redis pauses writes as the last node ends, so the attempt waits to store its last
    events; the cancel reaches it there (through its lease renewal, the bus being paused
    too). The attempt ends the run `interrupted` itself: before, it died silently and the
    run stayed `running` until its lease expired and the reaper found it."""
    cluster = await cluster_factory(1, redis_url=throwaway_redis.url, **DEFAULT_ENV)
    (instance,) = cluster.instances
    thread_id = str(uuid.uuid4())
    run = await instance.client.runs.create(
        thread_id, "steps", input=cluster.steps_input(1.5), if_not_exists="create"
    )
    run_id = str(run["run_id"])
    await wait_until(
        lambda: lines_of(cluster.log_lines(), run_id, node="s5", phase="start"),
        60,
        "the last step to start",
        interval=0.05,
    )
    redis = cluster.redis()
    redis.execute_command("CLIENT", "PAUSE", 14000, "WRITE")
    try:
        # The last step's checkpoint is written (PostgreSQL); its events cannot be.
        await wait_until(
            lambda: cluster.sql(
                "SELECT 1 FROM checkpoints WHERE thread_id = %s AND (metadata->>'step')::int = 5",
                thread_id,
            ),
            10,
            "the last checkpoint",
        )
        cancel = asyncio.ensure_future(
            instance.http.post(f"/threads/{thread_id}/runs/{run_id}/cancel")
        )
        # The cancel reaches the attempt through the bus (its answer came) or, should
        # Redis hold the message too, through the next lease renewal.
        await wait_until(
            lambda: cancel.done() or cancel_read_by_renewal(cluster, run_id),
            10,
            "the cancel to reach the attempt",
        )
        await asyncio.sleep(0.3)
    finally:
        redis.execute_command("CLIENT", "UNPAUSE")
        redis.close()
    assert (await cancel).status_code == 202
    joined = await instance.http.get(f"/threads/{thread_id}/runs/{run_id}/join", timeout=60)
    assert joined.status_code == 200, joined.text
    status = (await instance.client.runs.get(thread_id, run_id))["status"]
    assert status == "interrupted", cluster.tails()
    assert not reaped(instance, run_id), cluster.tails()
    assert {line["attempt"] for line in lines_of(cluster.log_lines(), run_id)} == {1}


# The hand-back's UPDATE (it alone sets `handovers`) waits in PostgreSQL before it touches a
# row, so a cancel can be recorded in the meantime.
SLOW_HAND_BACK = """
CREATE FUNCTION slow_hand_back() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF current_query() LIKE '%%handovers=(runs.handovers%%' THEN PERFORM pg_sleep(4); END IF;
  RETURN NULL;
END $$;
CREATE TRIGGER slow_hand_back BEFORE UPDATE ON runs
  FOR EACH STATEMENT EXECUTE FUNCTION slow_hand_back();
"""


@pytest.mark.slow
@pytest.mark.timeout(120)
async def test_a_cancel_during_a_hand_back_ends_the_run(cluster_factory: ClusterFactory) -> None:
    """SIGTERM makes the worker hand its run back; while that write waits, the run is
    cancelled through another instance. The worker ends the run `interrupted` (the cancel
    wins over the hand-back): before, the cancel killed the hand-back midway and the run
    stayed `running` until its lease expired."""
    cluster = await cluster_factory(1, **{**DEFAULT_ENV, "WORKER_DRAIN_TIMEOUT": "0"})
    (worker,) = cluster.instances
    cluster.env["WORKER_COUNT"] = "0"
    api = await asyncio.to_thread(cluster.add)
    cluster.sql(SLOW_HAND_BACK)
    thread_id = str(uuid.uuid4())
    run = await worker.client.runs.create(
        thread_id, "steps", input=cluster.steps_input(2.0), if_not_exists="create"
    )
    run_id = str(run["run_id"])
    await wait_until(
        lambda: lines_of(cluster.log_lines(), run_id, node="s1", phase="start"),
        30,
        "the run to start",
        interval=0.05,
    )
    worker.signal(signal.SIGTERM)
    await wait_until(
        lambda: cluster.sql(
            "SELECT 1 FROM pg_stat_activity WHERE datname = current_database() "
            "AND wait_event = 'PgSleep' AND query LIKE '%%handovers=(runs.handovers%%'"
        ),
        10,
        "the hand-back to wait",
        interval=0.05,
    )
    cancel = await api.http.post(f"/threads/{thread_id}/runs/{run_id}/cancel")
    assert cancel.status_code == 202, cancel.text
    assert cancel.json()["was"] == "running"
    joined = await api.http.get(f"/threads/{thread_id}/runs/{run_id}/join", timeout=60)
    assert joined.status_code == 200, joined.text
    status = (await api.client.runs.get(thread_id, run_id))["status"]
    assert status == "interrupted", cluster.tails()
    assert not reaped(api, run_id), cluster.tails()
    # Ended, not handed on: no second attempt ran.
    assert {line["attempt"] for line in lines_of(cluster.log_lines(), run_id)} == {1}
