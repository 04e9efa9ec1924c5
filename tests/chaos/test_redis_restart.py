"""Redis restarted under load: no committed write answers 5xx, and every run completes."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from dataclasses import dataclass

import httpx
import pytest

from tests.chaos.cluster import (
    DEFAULT_ENV,
    Cluster,
    ClusterFactory,
    Instance,
    RunRef,
    wait_terminal,
)
from tests.support.throwaway import ThrowawayRedis

DOWN_SECONDS = 3.0


@dataclass
class Answer:
    """One request of the load and what it was answered."""

    kind: str  # create | cancel | delete
    status: int
    thread_id: str
    run_id: str | None = None


async def _request(answers: list[Answer], kind: str, thread_id: str, call: object) -> Answer:
    try:
        response: httpx.Response = await call  # type: ignore[misc]
        status = response.status_code
        run_id = response.json().get("run_id") if kind == "create" and status == 200 else None
    except httpx.HTTPError:
        status, run_id = 599, None  # no answer at all: counted with the 5xx
    answer = Answer(kind, status, thread_id, run_id)
    answers.append(answer)
    return answer


async def _load(instance: Instance, cluster: Cluster, stop: asyncio.Event) -> list[Answer]:
    """Runs on new threads, and pending runs cancelled or deleted, until `stop`."""
    answers: list[Answer] = []
    http = instance.http
    index = 0
    while not stop.is_set():
        index += 1
        thread_id = str(uuid.uuid4())
        body = {
            "assistant_id": "steps",
            "input": cluster.steps_input(0.1),
            "if_not_exists": "create",
        }
        if index % 3:
            await _request(
                answers, "create", thread_id, http.post(f"/threads/{thread_id}/runs", json=body)
            )
            continue
        later = await _request(
            answers,
            "create",
            thread_id,
            http.post(f"/threads/{thread_id}/runs", json={**body, "after_seconds": 600}),
        )
        if later.run_id is None:
            continue
        path = f"/threads/{thread_id}/runs/{later.run_id}"
        if index % 2:
            await _request(answers, "cancel", thread_id, http.post(f"{path}/cancel"))
        else:
            await _request(answers, "delete", thread_id, http.delete(path))
        await asyncio.sleep(0.02)
    return answers


def _committed(cluster: Cluster, answer: Answer) -> bool:
    """Whether the database holds the write a request made (asked of PostgreSQL)."""
    rows = cluster.sql(
        "SELECT run_id, status, scheduled_at IS NOT NULL FROM runs WHERE thread_id = %s",
        answer.thread_id,
    )
    if answer.kind == "create":
        return bool(rows)
    if answer.kind == "cancel":
        return any(status == "interrupted" for _, status, _ in rows)
    return not rows  # delete


@pytest.mark.slow
@pytest.mark.timeout(180)
async def test_redis_restart_under_load(
    cluster_factory: ClusterFactory, throwaway_redis: ThrowawayRedis
) -> None:
    cluster = await cluster_factory(2, redis_url=throwaway_redis.url)
    stop = asyncio.Event()
    loads = [asyncio.create_task(_load(i, cluster, stop)) for i in cluster.instances]
    await asyncio.sleep(2.0)
    throwaway_redis.stop()
    stopped_at = time.monotonic()
    await asyncio.sleep(DOWN_SECONDS)
    throwaway_redis.start()
    await asyncio.sleep(2.0)
    stop.set()
    answers = [answer for load in await asyncio.gather(*loads) for answer in load]

    failed = [a for a in answers if a.status >= 500]
    committed_5xx = [a for a in failed if _committed(cluster, a)]
    assert not committed_5xx, f"{committed_5xx}\n{cluster.tails()}"
    refs: list[RunRef] = [
        (a.thread_id, a.run_id)
        for a in answers
        if a.kind == "create" and a.run_id is not None and a.status == 200
    ]
    ended = {a.thread_id for a in answers if a.kind in ("cancel", "delete")}
    running = [ref for ref in refs if ref[0] not in ended]
    final = await wait_terminal(cluster, running, timeout=90)
    recovered_in = time.monotonic() - stopped_at
    assert set(final.values()) == {"success"}, f"{final}\n{cluster.tails()}"
    for answer in answers:
        if answer.kind == "cancel" and answer.status < 300:
            assert _committed(cluster, answer), answer
    assert all(instance.alive() for instance in cluster.instances)
    counts = {kind: sum(a.kind == kind for a in answers) for kind in ("create", "cancel", "delete")}
    print(
        f"redis restart: requests={counts} 5xx={len(failed)} (none committed) "
        f"runs={len(running)} all success {recovered_in:.1f}s after the stop"
    )


@dataclass
class Watched:
    """What one streaming client received, across its reconnections."""

    frames: list[tuple[str, str]]
    cut_short: int  # bodies that ended before the stream did (resumed with Last-Event-ID)


async def _watch(instance: Instance, cluster: Cluster) -> Watched:
    """Stream a run of `steps` to its end, resuming with Last-Event-ID if the body is cut."""
    thread_id = str(uuid.uuid4())
    body = {
        "assistant_id": "steps",
        "input": cluster.steps_input(0.5),
        "if_not_exists": "create",
        "stream_mode": ["values"],
    }
    frames: list[tuple[str, str]] = []
    cut_short, last_id, run_path = 0, "", ""
    while True:
        if run_path:
            request = instance.http.stream(
                "GET", f"{run_path}/stream", headers={"Last-Event-ID": last_id}, timeout=120
            )
        else:
            request = instance.http.stream(
                "POST", f"/threads/{thread_id}/runs/stream", json=body, timeout=120
            )
        event, event_id = "", ""
        try:
            async with request as response:
                assert response.status_code == 200, await response.aread()
                run_path = run_path or response.headers["content-location"]
                async for line in response.aiter_lines():
                    if line.startswith("event: "):
                        event = line[7:]
                    elif line.startswith("id: "):
                        event_id = line[4:]
                    elif line.startswith("data: "):
                        frames.append((event, line[6:]))
                        last_id = event_id or last_id
            return Watched(frames, cut_short)
        except httpx.HTTPError:
            cut_short += 1


@pytest.mark.slow
@pytest.mark.timeout(180)
async def test_streams_connected_through_a_redis_restart_end_whole(
    cluster_factory: ClusterFactory, throwaway_redis: ThrowawayRedis
) -> None:
    """Clients streaming when Redis restarts (at the default settings) are never cut off
    mid-body: each stream goes on and ends with the run's final state and `end`."""
    cluster = await cluster_factory(2, redis_url=throwaway_redis.url, **DEFAULT_ENV)
    watchers = [
        asyncio.create_task(_watch(cluster.instances[index % 2], cluster)) for index in range(10)
    ]
    await asyncio.sleep(1.0)
    throwaway_redis.stop()
    await asyncio.sleep(DOWN_SECONDS)
    throwaway_redis.start()
    watched = await asyncio.gather(*watchers)

    assert [w.cut_short for w in watched] == [0] * 10, cluster.tails()
    for seen in watched:
        assert seen.frames[-1][0] == "end", f"{seen.frames}\n{cluster.tails()}"
        final = [json.loads(data) for event, data in seen.frames if event == "values"][-1]
        assert len(final["done"]) == 5, f"{seen.frames}\n{cluster.tails()}"
    statuses = dict(cluster.sql("SELECT status, count(*) FROM runs GROUP BY status"))
    assert statuses == {"success": 10}, f"{statuses}\n{cluster.tails()}"
