"""Redis down after the database committed: the client gets its 2xx, the write stands."""

from __future__ import annotations

import uuid

import pytest

from tests.chaos.cluster import ClusterFactory, Instance
from tests.support.throwaway import ThrowawayRedis


async def _pending_run(instance: Instance, thread_id: str | None = None) -> tuple[str, str]:
    """A run nobody executes (the instance has no workers): (thread id, run id)."""
    body = {"assistant_id": "short", "input": {"delay": 0.01}}
    if thread_id is None:
        response = await instance.http.post("/runs", json=body)
    else:
        body["if_not_exists"] = "create"
        response = await instance.http.post(f"/threads/{thread_id}/runs", json=body)
    assert response.status_code == 200, response.text
    run = response.json()
    return str(run["thread_id"]), str(run["run_id"])


@pytest.mark.timeout(120)
async def test_writes_committed_while_redis_is_down_answer_2xx(
    cluster_factory: ClusterFactory, throwaway_redis: ThrowawayRedis
) -> None:
    """Cancel of a pending run, delete of a run and of a thread, and multitask creates
    (interrupt, rollback) each commit, then meet a dead Redis for their signals."""
    cluster = await cluster_factory(1, redis_url=throwaway_redis.url, WORKER_COUNT="0")
    (api,) = cluster.instances
    cancelled = await _pending_run(api, str(uuid.uuid4()))
    deleted = await _pending_run(api, str(uuid.uuid4()))
    interrupted = await _pending_run(api, str(uuid.uuid4()))
    rolled_back = await _pending_run(api, str(uuid.uuid4()))
    stateless = await _pending_run(api)
    thread_gone = await _pending_run(api, str(uuid.uuid4()))
    throwaway_redis.stop()

    answers: dict[str, int] = {}
    thread_id, run_id = cancelled
    response = await api.http.post(f"/threads/{thread_id}/runs/{run_id}/cancel")
    answers["cancel"] = response.status_code
    thread_id, run_id = stateless
    response = await api.http.post(f"/threads/{thread_id}/runs/{run_id}/cancel")
    answers["cancel stateless"] = response.status_code
    thread_id, run_id = deleted
    answers["delete run"] = (
        await api.http.delete(f"/threads/{thread_id}/runs/{run_id}")
    ).status_code
    answers["delete thread"] = (await api.http.delete(f"/threads/{thread_gone[0]}")).status_code
    for strategy, (thread_id, _run_id) in (("interrupt", interrupted), ("rollback", rolled_back)):
        response = await api.http.post(
            f"/threads/{thread_id}/runs",
            json={"assistant_id": "short", "input": {}, "multitask_strategy": strategy},
        )
        answers[strategy] = response.status_code
    assert all(200 <= code < 300 for code in answers.values()), f"{answers}\n{cluster.tails()}"

    async def status(ref: tuple[str, str]) -> str | int:
        response = await api.http.get(f"/threads/{ref[0]}/runs/{ref[1]}")
        return response.json()["status"] if response.status_code == 200 else response.status_code

    assert await status(cancelled) == "interrupted"
    assert await status(interrupted) == "interrupted"
    assert await status(deleted) == 404
    assert await status(rolled_back) == 404
    assert (await api.http.get(f"/threads/{thread_gone[0]}")).status_code == 404
    # The stateless run's temporary thread went with it.
    assert (await api.http.get(f"/threads/{stateless[0]}")).status_code == 404
