"""A thread stream joined on one instance follows runs created and executed on another."""

from __future__ import annotations

import asyncio

import pytest

from tests.chaos.cluster import Cluster

STREAM_TIMEOUT = 60.0


@pytest.mark.slow
async def test_thread_stream_on_one_instance_follows_runs_of_another(cluster: Cluster) -> None:
    first, second = cluster.instances
    thread = await first.client.threads.create()
    thread_id = thread["thread_id"]
    stream = await second.client.threads.join_stream(thread_id, last_event_id="-")

    async def read(runs: int) -> list[tuple[str, dict]]:
        seen: list[tuple[str, dict]] = []
        async for part in stream:
            seen.append((part.event, part.data))
            if sum(1 for _, data in seen if data.get("status") == "run_done") == runs:
                return seen
        return seen

    reader = asyncio.create_task(asyncio.wait_for(read(2), STREAM_TIMEOUT))
    created = []
    for _ in range(2):
        run = await first.client.runs.create(
            thread_id, "steps", input=cluster.steps_input(0.1), stream_mode=["updates"]
        )
        created.append(run["run_id"])
    parts = await reader
    done = [data["run_id"] for _, data in parts if data.get("status") == "run_done"]
    assert done == created
    started = [data["run_id"] for event, data in parts if event == "metadata" and "attempt" in data]
    assert started == created
    updates = [data for event, data in parts if event == "updates"]
    assert len(updates) == 2 * 5  # five nodes per run
