"""Instances die or freeze mid-run: runs resume elsewhere, stale workers write nothing."""

from __future__ import annotations

import asyncio
import json
import signal
import time
from collections import Counter
from typing import Any

import httpx
import pytest

from tests.chaos.cluster import (
    Cluster,
    ClusterFactory,
    Instance,
    RunRef,
    done_counts,
    lines_of,
    submit,
    wait_terminal,
    wait_until,
)
from tests.support.runs import parse_sse

# Long enough that a kill lands inside a node, well after the previous checkpoint was saved.
NODE_DELAY = 1.5
SETTLED = 0.4  # seconds a node must have been running before we strike


def executing_pid(lines: list[dict[str, Any]], run_id: str) -> int | None:
    """The pid that logged the run's latest line."""
    mine = lines_of(lines, run_id)
    return mine[-1]["pid"] if mine else None


def mid_node(lines: list[dict[str, Any]], run_id: str, pid: int) -> bool:
    """The run's latest line is a `start` by `pid`, logged at least SETTLED seconds ago."""
    mine = lines_of(lines, run_id)
    if not mine:
        return False
    last = mine[-1]
    return last["phase"] == "start" and last["pid"] == pid and time.time() - last["t"] >= SETTLED


@pytest.mark.slow
@pytest.mark.timeout(150)
async def test_sigkill_mid_graph_resumes_on_another_instance(cluster: Cluster) -> None:
    """Every run of a SIGKILLed instance ends `success` elsewhere, without redoing done nodes."""
    a, b = cluster.instances
    refs: list[RunRef] = []
    for index in range(4):
        refs.append(await submit((a, b)[index % 2], "steps", cluster.steps_input(NODE_DELAY)))
    run_ids = [run_id for _, run_id in refs]
    await wait_until(
        lambda: all(lines_of(cluster.log_lines(), r) for r in run_ids), 30, "every run to start"
    )
    lines = cluster.log_lines()
    owners = Counter(executing_pid(lines, r) for r in run_ids)
    victim = cluster.by_pid(owners.most_common(1)[0][0])  # type: ignore[arg-type]
    victim_runs = [r for r in run_ids if executing_pid(lines, r) == victim.pid]

    # Strike when every victim run is inside a node, with something already done to keep.
    def ready() -> bool:
        now = cluster.log_lines()
        return all(mid_node(now, r, victim.pid) for r in victim_runs) and any(
            lines_of(now, r, phase="done") for r in victim_runs
        )

    await wait_until(ready, 40, "the victim's runs to be mid-node", interval=0.05)
    victim.kill()
    killed_at = time.time()
    before = cluster.log_lines()

    final = await wait_terminal(cluster, refs, timeout=60)
    assert set(final.values()) == {"success"}, f"{final}\n{cluster.tails()}"

    lines = cluster.log_lines()
    survivor = cluster.other(victim)
    for thread_id, run_id in refs:
        assert done_counts(lines, run_id) == {f"s{i}": 1 for i in range(1, 6)}, lines_of(
            lines, run_id
        )
        kept = {line["node"] for line in lines_of(before, run_id, phase="done")}
        redone = [
            line
            for line in lines_of(lines, run_id, phase="start")
            if line["node"] in kept and line["t"] > killed_at
        ]
        assert not redone, f"completed nodes of {run_id} ran again after the kill: {redone}"
        values = await survivor.client.runs.join(thread_id, run_id)
        assert [d["node"] for d in values["done"]] == [f"s{i}" for i in range(1, 6)]
    for run_id in victim_runs:
        resumed = lines_of(lines, run_id, phase="done", pid=survivor.pid)
        assert resumed and all(line["attempt"] == 2 for line in resumed), lines_of(lines, run_id)


async def checkpoints(instance: Instance, thread_id: str) -> list[tuple[str, int]]:
    """(checkpoint id, run attempt) of the thread's checkpoints, oldest first.

    Checkpoint ids are time-ordered UUIDs, so string order is creation order.
    """
    history = await instance.client.threads.get_history(thread_id, limit=1000)
    out = [
        (str(state["checkpoint"]["checkpoint_id"]), int(state["metadata"]["run_attempt"]))
        for state in history
        if state["metadata"] and "run_attempt" in state["metadata"]
    ]
    return sorted(out)


async def replay(instance: Instance, thread_id: str, run_id: str) -> list[Any]:
    """Every stored event of a finished run, replayed with Last-Event-ID 0."""
    response = await instance.http.get(
        f"/threads/{thread_id}/runs/{run_id}/stream", headers={"Last-Event-ID": "0"}
    )
    assert response.status_code == 200, response.text
    return parse_sse(response.content)


def attempts_in(event: Any) -> set[int]:
    """The attempts named by a `updates` event of the steps graph."""
    if event.event != "updates":
        return set()
    return {d["attempt"] for update in event.data.values() for d in update["done"]}


@pytest.mark.slow
@pytest.mark.timeout(150)
async def test_paused_worker_past_its_lease_writes_nothing(cluster: Cluster) -> None:
    """SIGSTOP past the lease, finish elsewhere, SIGCONT: attempt 2's result stands alone."""
    first = cluster.instances[0]
    thread_id, run_id = await submit(first, "steps", cluster.steps_input(1.0))
    await wait_until(
        lambda: bool(lines_of(cluster.log_lines(), run_id, node="s2", phase="start")),
        30,
        "the run to reach s2",
    )
    victim = cluster.by_pid(lines_of(cluster.log_lines(), run_id)[-1]["pid"])
    await wait_until(
        lambda: mid_node(cluster.log_lines(), run_id, victim.pid), 10, "s2 to settle", 0.05
    )
    victim.signal(signal.SIGSTOP)
    stopped_done = {line["node"] for line in lines_of(cluster.log_lines(), run_id, phase="done")}
    survivor = cluster.other(victim)

    final = await wait_terminal(cluster, [(thread_id, run_id)], timeout=60)
    assert final[run_id] == "success", cluster.tails()
    row_before = await asyncio.to_thread(
        cluster.sql, "SELECT status, attempt, ended_at, output FROM runs WHERE run_id = %s", run_id
    )
    output_before = await survivor.client.runs.join(thread_id, run_id)

    victim.signal(signal.SIGCONT)
    # The stale worker wakes with its node half done; wait until it has stood down.
    await wait_until(
        lambda: f"run_stood_down run_id={run_id}" in victim.log_tail(200_000),
        20,
        "the stale worker to stand down",
    )
    await asyncio.sleep(1.0)  # room for any write that would (wrongly) still land

    row_after = await asyncio.to_thread(
        cluster.sql, "SELECT status, attempt, ended_at, output FROM runs WHERE run_id = %s", run_id
    )
    assert row_after == row_before
    status, attempt, _ended, output = row_after[0]
    assert (status, attempt) == ("success", 2)
    assert await survivor.client.runs.join(thread_id, run_id) == output_before
    by_node = {d["node"]: d for d in output["done"]}
    assert sorted(by_node) == [f"s{i}" for i in range(1, 6)]
    for node, entry in by_node.items():
        expected = 1 if node in stopped_done else 2
        assert entry["attempt"] == expected, f"{node} came from attempt {entry['attempt']}"

    history = await checkpoints(survivor, thread_id)
    second = [cid for cid, att in history if att == 2]
    assert second, f"attempt 2 wrote no checkpoint: {history}"
    assert any(att == 1 for _, att in history), f"attempt 1's checkpoints are missing: {history}"
    late = [cid for cid, att in history if att == 1 and cid > second[0]]
    assert not late, f"the stale attempt wrote checkpoints after attempt 2 began: {late}"

    events = await replay(survivor, thread_id, run_id)
    starts = [i for i, e in enumerate(events) if e.event == "metadata" and e.data["attempt"] == 2]
    assert len(starts) == 1, [e.event for e in events]
    after = events[starts[0] + 1 :]
    stale = [e for e in after if e.event == "metadata" or attempts_in(e) - {2}]
    assert not stale, f"attempt 1 published after attempt 2 began: {stale}"
    assert [e.event for e in after].count("end") == 1
    assert victim.alive(), "the paused instance should recover, not crash"


@pytest.mark.slow
@pytest.mark.timeout(150)
async def test_run_that_kills_its_worker_fails_after_retry_limit(
    cluster_factory: ClusterFactory,
) -> None:
    """A poison run that SIGKILLs every instance executing it ends `error` after 3 attempts."""
    cluster = await cluster_factory(2)
    poison = {"log": str(cluster.graph_log)}
    thread_id, run_id = await submit(cluster.instances[0], "suicide", poison)
    restarts: set[asyncio.Task[Any]] = set()
    restarting: set[str] = set()
    deadline = time.monotonic() + 100
    run: dict[str, Any] = {}

    async def revive(dead: Instance) -> None:
        try:
            await cluster.replace(dead)
        except RuntimeError:
            # The replacement claimed the poison run before it answered /ok and died of
            # it, which is the behaviour under test: the loop revives it again.
            pass
        finally:
            restarting.discard(dead.name)

    while time.monotonic() < deadline:
        for instance in list(cluster.instances):
            if not instance.alive() and instance.name not in restarting:
                restarting.add(instance.name)
                restarts.add(asyncio.create_task(revive(instance)))
        try:
            run = dict(await cluster.live().client.runs.get(thread_id, run_id))
        except (httpx.HTTPError, AssertionError):
            await asyncio.sleep(0.2)
            continue
        if run["status"] not in ("pending", "running"):
            break
        await asyncio.sleep(0.2)
    await asyncio.gather(*restarts)
    assert run.get("status") == "error", f"{run}\n{cluster.tails()}"

    deaths = lines_of(cluster.log_lines(), run_id, node="die")
    assert [line["attempt"] for line in deaths] == [1, 2, 3], deaths
    assert len({line["pid"] for line in deaths}) == 3

    result = await cluster.live().client.runs.join(thread_id, run_id)
    error = result["__error__"]
    assert error["error"] == "RetryLimitExceeded"
    assert "retried 3 times" in error["message"], error
    events = parse_sse(
        (
            await cluster.live().http.get(
                f"/threads/{thread_id}/runs/{run_id}/stream", headers={"Last-Event-ID": "0"}
            )
        ).content
    )
    errors = [e.data for e in events if e.event == "error"]
    assert errors and errors[-1] == error, errors
    thread = await cluster.live().client.threads.get(thread_id)
    assert thread["status"] == "error", thread
    print(json.dumps({"attempts": len(deaths), "error": error}))


@pytest.mark.slow
@pytest.mark.timeout(120)
async def test_cancel_of_a_run_whose_worker_froze_is_not_lost(cluster: Cluster) -> None:
    """Cancel acknowledged while the executing instance is frozen: the run ends interrupted.

    The pub/sub message reaches a stopped process, and the lease then expires: the reaper
    must end the run instead of handing it to another worker to execute again.
    """
    first = cluster.instances[0]
    thread_id, run_id = await submit(first, "steps", cluster.steps_input(1.0))
    await wait_until(
        lambda: bool(lines_of(cluster.log_lines(), run_id, node="s2", phase="start")),
        30,
        "the run to reach s2",
    )
    victim = cluster.by_pid(lines_of(cluster.log_lines(), run_id)[-1]["pid"])
    victim.signal(signal.SIGSTOP)
    survivor = cluster.other(victim)
    try:
        answer = await survivor.http.post(f"/threads/{thread_id}/runs/{run_id}/cancel")
        assert answer.status_code == 202, answer.text
        final = await wait_terminal(cluster, [(thread_id, run_id)], timeout=60)
        assert final[run_id] == "interrupted", cluster.tails()
        started = lines_of(cluster.log_lines(), run_id, phase="start")
        assert {line["attempt"] for line in started} == {1}, "the cancelled run ran again"
        thread = await survivor.client.threads.get(thread_id)
        assert thread["status"] in ("interrupted", "idle"), thread
    finally:
        victim.signal(signal.SIGCONT)
