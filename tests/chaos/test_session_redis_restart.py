"""The thread streaming session across a Redis restart (at the default settings): over SSE
and over a WebSocket, a session following a run while Redis restarts, and one opened while
Redis is down (it replays an ended run whose log cannot be read), send no error frame, end
that run, and carry the thread's next run whole."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from websockets.asyncio.client import connect

from tests.chaos.cluster import DEFAULT_ENV, Cluster, ClusterFactory, Instance
from tests.support.throwaway import ThrowawayRedis

DOWN_SECONDS = 3.0
CHANNELS = ["values", "lifecycle"]
STEPS = 5  # the `steps` graph's nodes


def root_phase(frame: dict[str, Any]) -> str | None:
    """The root lifecycle's phase a frame carries (None for any other frame)."""
    params = frame.get("params") or {}
    if frame.get("method") != "lifecycle" or params.get("namespace"):
        return None
    return str(params.get("data", {}).get("event"))


async def sse_frames(instance: Instance, thread_id: str) -> AsyncIterator[dict[str, Any]]:
    """The session's frames over SSE."""
    body = {"channels": CHANNELS}
    path = f"/threads/{thread_id}/stream/events"
    async with instance.http.stream("POST", path, json=body, timeout=120) as response:
        assert response.status_code == 200, await response.aread()
        async for line in response.aiter_lines():
            if line.startswith("data: "):
                yield json.loads(line[6:])


async def ws_frames(instance: Instance, thread_id: str) -> AsyncIterator[dict[str, Any]]:
    """The session's frames over a WebSocket subscription."""
    url = instance.server.url.replace("http://", "ws://") + f"/threads/{thread_id}/stream/events"
    async with connect(url) as socket:
        command = {"id": 1, "method": "subscription.subscribe", "params": {"channels": CHANNELS}}
        await socket.send(json.dumps(command))
        async for raw in socket:
            frame = json.loads(raw)
            if frame.get("type") != "success":
                yield frame


async def start_run(instance: Instance, cluster: Cluster, thread_id: str, delay: float) -> None:
    """`run.start` of the `steps` graph on the thread."""
    command = {
        "id": 1,
        "method": "run.start",
        "params": {"assistant_id": "steps", "input": cluster.steps_input(delay)},
    }
    reply = await instance.http.post(f"/threads/{thread_id}/commands", json=command)
    assert reply.status_code == 200 and reply.json()["type"] == "success", reply.text


async def session(
    instance: Instance,
    cluster: Cluster,
    transport: str,
    thread_id: str,
    first_delay: float | None,
    connected: asyncio.Event,
) -> list[dict[str, Any]]:
    """Every frame a session on the thread receives until its second run has ended: the
    first run is started here (`first_delay`) or ran already (None); the second is
    started once the first has ended."""
    if first_delay is not None:
        await start_run(instance, cluster, thread_id, first_delay)
    frames: list[dict[str, Any]] = []
    ends = 0
    source = sse_frames if transport == "sse" else ws_frames
    async for frame in source(instance, thread_id):
        frames.append(frame)
        phase = root_phase(frame)
        connected.set()
        if frame.get("type") == "error":
            break
        if phase in ("completed", "failed"):
            ends += 1
            if ends == 2:
                break
            await start_run(instance, cluster, thread_id, 0.1)
    return frames


async def ran_before(instance: Instance, cluster: Cluster) -> str:
    """A thread whose first session run has ended."""
    thread_id = str(uuid.uuid4())
    await start_run(instance, cluster, thread_id, 0.05)
    for _ in range(300):
        runs = (await instance.http.get(f"/threads/{thread_id}/runs")).json()
        if runs and runs[0]["status"] == "success":
            return thread_id
        await asyncio.sleep(0.1)
    raise AssertionError(f"the first run of {thread_id} did not end: {runs}")


@pytest.mark.slow
@pytest.mark.timeout(180)
async def test_session_goes_on_across_a_redis_restart(
    cluster_factory: ClusterFactory, throwaway_redis: ThrowawayRedis
) -> None:
    """Per transport, one session follows a run while Redis restarts, another opens on a
    thread while Redis is down (it replays the thread's ended run): neither gets an error
    frame, and each gets both runs' ends and the second run whole."""
    cluster = await cluster_factory(2, redis_url=throwaway_redis.url, **DEFAULT_ENV)
    transports = ("sse", "websocket")
    ended = [await ran_before(cluster.instances[i], cluster) for i in range(2)]
    across = {t: asyncio.Event() for t in transports}
    sessions = [
        asyncio.create_task(
            session(cluster.instances[i], cluster, t, str(uuid.uuid4()), 0.8, across[t])
        )
        for i, t in enumerate(transports)
    ]
    await asyncio.wait_for(asyncio.gather(*(e.wait() for e in across.values())), 30)
    await asyncio.sleep(0.5)
    throwaway_redis.stop()
    during = {t: asyncio.Event() for t in transports}
    sessions += [
        asyncio.create_task(session(cluster.instances[i], cluster, t, ended[i], None, during[t]))
        for i, t in enumerate(transports)
    ]
    await asyncio.sleep(DOWN_SECONDS)
    throwaway_redis.start()
    results = await asyncio.wait_for(asyncio.gather(*sessions), 120)

    names = [f"{t} {when}" for when in ("across", "during") for t in transports]
    for name, frames in zip(names, results, strict=True):
        errors = [f for f in frames if f.get("type") == "error"]
        assert not errors, f"{name}: {errors}\n{cluster.tails()}"
        phases = [p for p in map(root_phase, frames) if p in ("completed", "failed")]
        assert phases == ["completed", "completed"], f"{name}: {phases}\n{cluster.tails()}"
        # The second run, started after the restart, arrives whole: every step's values.
        second = frames[max(i for i, f in enumerate(frames) if root_phase(f) == "running") :]
        values = [f["params"]["data"] for f in second if f.get("method") == "values"]
        assert values and len(values[-1]["done"]) >= 2 * STEPS, f"{name}: {second}"
    statuses = dict(cluster.sql("SELECT status, count(*) FROM runs GROUP BY status"))
    assert statuses == {"success": 8}, f"{statuses}\n{cluster.tails()}"
