"""A batch created on one instance is executed by the cluster, each run exactly once."""

from __future__ import annotations

import pytest

from tests.chaos.cluster import Cluster, done_counts, wait_terminal
from tests.chaos.graphs.chaos import STEP_NODES


@pytest.mark.slow
async def test_batch_runs_execute_once_each_across_two_instances(cluster: Cluster) -> None:
    first, second = cluster.instances
    payloads = [
        {"assistant_id": "steps", "input": cluster.steps_input(0.2), "on_completion": "keep"}
        for _ in range(8)
    ]
    response = await first.http.post("/runs/batch", json=payloads)
    assert response.status_code == 200, response.text
    runs = response.json()
    refs = [(run["thread_id"], run["run_id"]) for run in runs]
    seen = await wait_terminal(cluster, refs, timeout=60)
    assert set(seen.values()) == {"success"}, seen
    lines = cluster.log_lines()
    for _, run_id in refs:
        assert done_counts(lines, run_id) == dict.fromkeys(STEP_NODES, 1)
    # Every run is visible through the other instance.
    for thread_id, run_id in refs:
        assert (await second.client.runs.get(thread_id, run_id))["status"] == "success"
