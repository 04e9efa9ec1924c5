"""Runs ended by the reaper, and rollbacks of runs that already ran, end like any other."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from tests.chaos.cluster import ClusterFactory, lines_of, wait_terminal, wait_until
from tests.support.webhooks import WebhookReceiver


@pytest.mark.timeout(120)
async def test_a_run_out_of_retries_wakes_join_and_fires_its_webhook(
    cluster_factory: ClusterFactory, receiver: WebhookReceiver
) -> None:
    """The run's node kills its instance; the reaper of an API-only instance fails it (one
    lost attempt allowed): a /join waiting there returns the reason, the webhook fires."""
    cluster = await cluster_factory(1, BG_JOB_MAX_RETRIES="1")
    cluster.env["WORKER_COUNT"] = "0"
    api = await asyncio.to_thread(cluster.add)
    thread_id = str(uuid.uuid4())
    created = await api.http.post(
        f"/threads/{thread_id}/runs",
        json={
            "assistant_id": "suicide",
            "input": {"log": str(cluster.graph_log)},
            "if_not_exists": "create",
            "webhook": f"{receiver.url}/hook",
        },
    )
    assert created.status_code == 200, created.text
    run_id = created.json()["run_id"]
    joined = await api.http.get(f"/threads/{thread_id}/runs/{run_id}/join", timeout=60)
    assert joined.status_code == 200, joined.text
    error = joined.json()["__error__"]
    assert error["error"] == "RetryLimitExceeded", error
    _path, body = await receiver.wait_for(run_id, timeout=20)
    assert body["status"] == "error"
    assert body["error"]["error"] == "RetryLimitExceeded"
    assert [line["attempt"] for line in lines_of(cluster.log_lines(), run_id)] == [1]


@pytest.mark.slow
@pytest.mark.timeout(150)
async def test_rolling_back_a_handed_back_run_leaves_a_clean_thread(
    cluster_factory: ClusterFactory,
) -> None:
    """A run handed back at SIGTERM after its first step, then rolled back by a new run:
    the thread no longer shows that step, and the new run starts from a clean thread."""
    cluster = await cluster_factory(1, WORKER_DRAIN_TIMEOUT="0")
    (worker,) = cluster.instances
    cluster.env["WORKER_COUNT"] = "0"
    api = await asyncio.to_thread(cluster.add)
    thread_id = str(uuid.uuid4())
    first = await worker.client.runs.create(
        thread_id, "steps", input=cluster.steps_input(2.0), if_not_exists="create"
    )
    first_id = str(first["run_id"])
    # s2 starts once s1's checkpoint is written.
    await wait_until(
        lambda: bool(lines_of(cluster.log_lines(), first_id, node="s2", phase="start")),
        30,
        "the first run's second step",
    )
    await asyncio.to_thread(worker.server.stop)
    run = await api.client.runs.get(thread_id, first_id)
    assert run["status"] == "pending", run
    state = await api.client.threads.get_state(thread_id)
    assert len((state["values"] or {}).get("done", [])) == 1, state  # s1, as handed back

    second = await api.client.runs.create(
        thread_id, "steps", input=cluster.steps_input(0.05), multitask_strategy="rollback"
    )
    state = await api.client.threads.get_state(thread_id)
    assert not (state["values"] or {}).get("done"), state

    cluster.env.pop("WORKER_COUNT")
    await asyncio.to_thread(cluster.add)
    final = await wait_terminal(cluster, [(thread_id, str(second["run_id"]))], timeout=60)
    assert set(final.values()) == {"success"}, final
    state = await api.client.threads.get_state(thread_id)
    done = (state["values"] or {}).get("done", [])
    assert [step["node"] for step in done] == ["s1", "s2", "s3", "s4", "s5"], done
