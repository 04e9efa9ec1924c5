"""Requests reach a run wherever it executes: cancels, and streams resumed on another instance."""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest

from runyard.services.run_waits import SAFETY_RECHECK_SECONDS
from tests.chaos.cluster import Cluster, Instance, lines_of, submit, wait_until
from tests.support.runs import SseEvent, id_key, parse_sse, read_events_until, run_id_from

CANCEL_BOUND = 5.0  # the promise is "within a second"; the bound leaves room for a busy CI box


@pytest.mark.slow
async def test_cancel_through_another_instance_interrupts_the_run(cluster: Cluster) -> None:
    """Cancel on B a run executing on A: it is `interrupted` quickly and runs no further node."""
    thread_id, run_id = await submit(cluster.instances[0], "steps", cluster.steps_input(1.0))
    await wait_until(lambda: bool(lines_of(cluster.log_lines(), run_id)), 30, "the run to start")
    executor = cluster.by_pid(lines_of(cluster.log_lines(), run_id)[-1]["pid"])
    other = cluster.other(executor)

    started = time.monotonic()
    response = await other.http.post(f"/threads/{thread_id}/runs/{run_id}/cancel")
    assert response.status_code == 202, response.text
    # The executing instance acknowledged it: the answer says so, not "recorded" only.
    assert response.json()["delivered"] is True, response.text
    status = ""
    while time.monotonic() - started < CANCEL_BOUND:
        status = (await other.client.runs.get(thread_id, run_id))["status"]
        if status == "interrupted":
            break
        await asyncio.sleep(0.02)
    latency = time.monotonic() - started
    assert status == "interrupted", f"{status!r} {latency:.2f}s after cancel\n{cluster.tails()}"
    print(f"cancel latency across instances: {latency * 1000:.0f} ms")

    seen = len(cluster.log_lines())
    await asyncio.sleep(1.5)  # longer than a node: a still-running graph would log more
    assert len(cluster.log_lines()) == seen, lines_of(cluster.log_lines(), run_id)
    assert (await executor.client.runs.get(thread_id, run_id))["status"] == "interrupted"


@pytest.mark.slow
async def test_cancel_flag_stops_the_run_when_the_message_is_lost(cluster: Cluster) -> None:
    """A cancel whose pub/sub message never arrives is applied at the next heartbeat."""
    thread_id, run_id = await submit(cluster.instances[0], "steps", cluster.steps_input(1.0))
    await wait_until(lambda: bool(lines_of(cluster.log_lines(), run_id)), 30, "the run to start")
    # What the cancel service commits before publishing; here nothing is published.
    await asyncio.to_thread(
        cluster.sql,
        "UPDATE runs SET cancel_action = 'interrupt' WHERE run_id = %s AND status = 'running'",
        run_id,
    )
    instance = cluster.instances[1]
    latency = await wait_until(
        lambda: status_is(instance, thread_id, run_id, "interrupted"), CANCEL_BOUND, "interrupted"
    )
    print(f"cancel latency through the heartbeat flag: {latency * 1000:.0f} ms")


async def status_is(instance: Instance, thread_id: str, run_id: str, status: str) -> bool:
    """True when the run has this status."""
    return bool((await instance.client.runs.get(thread_id, run_id))["status"] == status)


def key(event: SseEvent) -> tuple[str | None, str, str]:
    """What identifies an event for comparison."""
    return event.id, event.event, repr(event.data)


@pytest.mark.slow
async def test_stream_resumes_on_another_instance_with_last_event_id(cluster: Cluster) -> None:
    """Disconnect from A mid-run, reconnect to B with Last-Event-ID: exactly the missed events."""
    a, b = cluster.instances
    thread_id = str(uuid.uuid4())
    body = {
        "assistant_id": "steps",
        "input": cluster.steps_input(0.4),
        "stream_mode": ["values", "updates"],
        "if_not_exists": "create",
    }
    async with a.http.stream("POST", f"/threads/{thread_id}/runs/stream", json=body) as response:
        assert response.status_code == 200
        run_id = run_id_from(response.headers["content-location"])
        # metadata, initial values, then s1's update and values.
        first, _ = await read_events_until(response, 4)
    assert first[0].event == "metadata"
    await asyncio.sleep(0.6)  # miss some events while disconnected
    assert (await b.client.runs.get(thread_id, run_id))["status"] == "running"

    path = f"/threads/{thread_id}/runs/{run_id}/stream"
    last_id = first[-1].id
    assert last_id is not None
    resumed_response = await b.http.get(path, headers={"Last-Event-ID": last_id}, timeout=30)
    assert resumed_response.status_code == 200
    resumed = parse_sse(resumed_response.content)

    full = parse_sse((await a.http.get(path, headers={"Last-Event-ID": "0"})).content)
    assert [key(e) for e in first + resumed] == [key(e) for e in full]
    ids = [id_key(e.id) for e in full if e.id is not None]
    assert ids == sorted(ids) and len(set(ids)) == len(ids) == len(full)
    assert resumed[-1].event == "end"
    updates = [e.data for e in full if e.event == "updates"]
    assert [next(iter(u)) for u in updates] == ["s1", "s2", "s3", "s4", "s5"]
    print(f"stream: {len(first)} events from A, {len(resumed)} from B after Last-Event-ID")


@pytest.mark.slow
async def test_join_on_another_instance_is_woken_by_the_run_ending(cluster: Cluster) -> None:
    """Join on B a run executing on A: B learns of the end over Redis, not at its re-check."""
    thread_id, run_id = await submit(cluster.instances[0], "steps", cluster.steps_input(0.5))
    await wait_until(lambda: bool(lines_of(cluster.log_lines(), run_id)), 30, "the run to start")
    executor = cluster.by_pid(lines_of(cluster.log_lines(), run_id)[-1]["pid"])
    other = cluster.other(executor)
    assert (await other.client.runs.get(thread_id, run_id))["status"] == "running"
    # A join that missed the completion signal answers only at its safety re-check.
    async with asyncio.timeout(SAFETY_RECHECK_SECONDS - 5):
        await other.client.runs.join(thread_id, run_id)
    assert (await other.client.runs.get(thread_id, run_id))["status"] == "success"
