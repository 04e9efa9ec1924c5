"""A run handed back at SIGTERM has lost no attempt: it uses up none of BG_JOB_MAX_RETRIES."""

from __future__ import annotations

import signal

import pytest

from tests.chaos.cluster import (
    ClusterFactory,
    done_counts,
    lines_of,
    submit,
    wait_terminal,
    wait_until,
)


@pytest.mark.slow
@pytest.mark.timeout(150)
async def test_a_handover_then_a_crash_is_one_lost_attempt(cluster_factory: ClusterFactory) -> None:
    """Two attempts allowed to be lost. The first attempt is handed back (SIGTERM, no drain
    time), the second dies with its instance (SIGKILL): one lost attempt, so the third
    attempt runs and the run succeeds."""
    cluster = await cluster_factory(3, BG_JOB_MAX_RETRIES="2", WORKER_DRAIN_TIMEOUT="0")
    ref = await submit(cluster.instances[0], "steps", cluster.steps_input(1.0))
    run_id = ref[1]

    def started(attempt: int) -> int | None:
        lines = lines_of(cluster.log_lines(), run_id, phase="start", attempt=attempt)
        return int(lines[-1]["pid"]) if lines else None

    await wait_until(lambda: started(1) is not None, 30, "attempt 1 to start a step")
    first = cluster.by_pid(started(1))  # type: ignore[arg-type]
    first.signal(signal.SIGTERM)
    await wait_until(lambda: started(2) is not None, 30, "attempt 2 to start a step")
    second = cluster.by_pid(started(2))  # type: ignore[arg-type]
    second.kill()

    final = await wait_terminal(cluster, [ref], timeout=60)
    assert final == {run_id: "success"}, f"{final}\n{cluster.tails()}"
    lines = cluster.log_lines()
    assert {line["attempt"] for line in lines_of(lines, run_id)} == {1, 2, 3}
    assert set(done_counts(lines, run_id)) == {f"s{i}" for i in range(1, 6)}
