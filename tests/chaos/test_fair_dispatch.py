"""Fair dispatch on two `runyard serve` instances sharing PostgreSQL and Redis: a small group
is not starved by a big group's backlog, a high priority overtakes its own group's backlog,
and a SIGKILL in the middle of dispatching several groups loses no run."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from tests.chaos.cluster import (
    DEFAULT_ENV,
    Cluster,
    ClusterFactory,
    Instance,
    concurrent_attempts,
    lines_of,
    steps_done_twice,
    wait_until,
)
from tests.chaos.graphs.chaos import STEP_NODES
from tests.support.server import ROOT

PRIORITY_CONFIG = ROOT / "tests" / "graphs" / "langgraph_priority.json"
ONE_SLOT = {"WORKER_COUNT": "1", "N_JOBS_PER_WORKER": "1"}
BATCH = 1000  # the most runs one POST /runs/batch takes

# The figures: a backlog of 2,000 runs of group A, then 10 runs of group B; every
# B run starts before a tenth of A's backlog has.
BACKLOG, SMALL = 2000, 10


async def create_batch(instance: Instance, bodies: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Create stateless runs with POST /runs/batch, at most BATCH per request."""
    created: list[dict[str, Any]] = []
    for start in range(0, len(bodies), BATCH):
        response = await instance.http.post("/runs/batch", json=bodies[start : start + BATCH])
        assert response.status_code == 200, response.text
        created += response.json()
    return created


async def hold_every_slot(cluster: Cluster, gate: Path) -> None:
    """One `gate` run per instance (one slot each), all running, until `gate` exists."""
    body = {"assistant_id": "gate", "input": {"gate": str(gate)}}
    await create_batch(cluster.instances[0], [body] * len(cluster.instances))

    def both_running() -> bool:
        rows = cluster.sql("SELECT count(*) FROM runs WHERE status = 'running'")
        return int(rows[0][0]) == len(cluster.instances)

    await wait_until(both_running, 30, "a gate run on every instance")


def started(order: Path) -> list[str]:
    """The tags of the `stamp` runs started so far, in start order."""
    return order.read_text().split() if order.exists() else []


def stamp(tag: str, group: str, priority: int) -> dict[str, Any]:
    """A `stamp` run that the priority function places in `group` at `priority`."""
    metadata = {"assign": "set", "group": group, "priority": priority}
    return {"assistant_id": "stamp", "input": {"tag": tag}, "metadata": metadata}


@pytest.mark.slow
@pytest.mark.timeout(300)
async def test_a_small_group_and_an_urgent_run_pass_a_backlog_of_2000(
    cluster_factory: ClusterFactory, tmp_path: Path
) -> None:
    order = tmp_path / "order.txt"
    gate = tmp_path / "gate"
    cluster = await cluster_factory(2, config=PRIORITY_CONFIG, ORDER_FILE=str(order), **ONE_SLOT)
    first, second = cluster.instances
    await hold_every_slot(cluster, gate)

    began = time.monotonic()
    await create_batch(first, [stamp(f"a{n}", "a", 0) for n in range(BACKLOG)])
    backlog_s = time.monotonic() - began
    await create_batch(second, [stamp(f"b{n}", "b", 0) for n in range(SMALL)])
    await create_batch(first, [stamp("urgent", "a", -5)])
    waiting = int(cluster.sql("SELECT count(*) FROM runs WHERE status = 'pending'")[0][0])
    assert waiting == BACKLOG + SMALL + 1
    gate.touch()
    opened = time.monotonic()

    def decided() -> bool:
        tags = started(order)
        a_started = sum(1 for tag in tags if tag.startswith("a"))
        return a_started >= BACKLOG // 10 or {f"b{n}" for n in range(SMALL)} | {"urgent"} <= set(
            tags
        )

    await wait_until(decided, 240, "B's runs or a tenth of A's backlog to start", interval=0.2)
    tags = started(order)
    places = {tag: place for place, tag in enumerate(tags)}
    print(
        f"fair dispatch: {BACKLOG} runs of A submitted in {backlog_s:.1f}s; B's {SMALL} runs "
        f"and the urgent run, {time.monotonic() - opened:.1f}s after the gate opened: "
        f"at places {sorted(places.get(f'b{n}', -1) for n in range(SMALL))} and "
        f"{places.get('urgent', -1)} of {len(tags)}"
    )

    def a_before(tag: str) -> int:
        assert tag in places, f"{tag} did not start before {len(tags)} runs did: {tags[:50]}"
        return sum(1 for other in tags[: places[tag]] if other.startswith("a"))

    for n in range(SMALL):
        assert a_before(f"b{n}") < BACKLOG // 10
    # Priority -5 goes before every queued priority-0 run of its own group.
    assert a_before("urgent") < BACKLOG // 10


# Several groups, slots few enough that the backlog waits in the queue.
GROUPS, PER_GROUP, SLOTS = 4, 30, 3
NODE_DELAY = 0.05


def finished_runs(lines: list[dict[str, Any]]) -> set[str]:
    """Runs whose last step has logged `done`."""
    return {line["run_id"] for line in lines if line["node"] == STEP_NODES[-1]}


def in_flight(lines: list[dict[str, Any]], pid: int) -> set[str]:
    """Runs `pid` has begun whose last step has not logged `done`."""
    return {line["run_id"] for line in lines if line["pid"] == pid} - finished_runs(lines)


@pytest.mark.slow
@pytest.mark.timeout(300)
async def test_sigkill_while_dispatching_several_groups_loses_no_run(
    cluster_factory: ClusterFactory,
) -> None:
    """With the default timings: every run ends `success` once, and only the runs the killed
    instance was executing repeat a step, at most the one it was killed in."""
    total = GROUPS * PER_GROUP
    env = {**DEFAULT_ENV, "RUNYARD_FAIRNESS_KEY": "tenant", "N_JOBS_PER_WORKER": str(SLOTS)}
    cluster = await cluster_factory(2, **env)
    victim, survivor = cluster.instances
    bodies = [
        {
            "assistant_id": "steps",
            "input": cluster.steps_input(NODE_DELAY),
            "metadata": {"tenant": f"t{n % GROUPS}"},
            "on_completion": "keep",
        }
        for n in range(total)
    ]
    began = time.monotonic()
    created = await create_batch(survivor, bodies)
    refs = {run["run_id"]: run["thread_id"] for run in created}

    def mid_way() -> bool:
        lines = cluster.log_lines()
        return len(finished_runs(lines)) >= total // 3 and bool(in_flight(lines, victim.pid))

    await wait_until(mid_way, 120, "a third of the runs done, the victim executing", 0.02)
    victim.kill()
    at_kill = cluster.log_lines()
    # What the victim had begun and not finalized (a run whose last step is done may still
    # lack its final checkpoint, and so repeat that step).
    unfinished = {
        str(row[0]) for row in cluster.sql("SELECT run_id FROM runs WHERE status <> 'success'")
    }
    held = {line["run_id"] for line in at_kill if line["pid"] == victim.pid} & unfinished
    killed_s = time.monotonic() - began

    def all_ended() -> bool:
        rows = cluster.sql(
            "SELECT count(*) FROM runs WHERE status IN ('success', 'error', 'timeout',"
            " 'interrupted')"
        )
        return int(rows[0][0]) == total

    await wait_until(all_ended, 180, "every run to end", interval=0.5)
    lines = cluster.log_lines()
    resumed = {line["run_id"] for line in lines if line["attempt"] > 1}
    print(
        f"crash mid-dispatch: {total} runs in {GROUPS} groups; SIGKILL after {killed_s:.1f}s "
        f"with {len(finished_runs(at_kill))} done and {len(held)} begun on the victim; all "
        f"ended after {time.monotonic() - began:.1f}s; {len(resumed)} resumed"
    )

    counts = dict(cluster.sql("SELECT status, count(*) FROM runs GROUP BY status"))
    assert counts == {"success": total}, f"{counts}\n{cluster.tails()}"
    # One crash: a run is claimed at most twice (the victim's attempt, then the survivor's).
    assert int(cluster.sql("SELECT max(attempt) FROM runs")[0][0]) <= 2
    for run_id, thread_id in refs.items():
        assert not concurrent_attempts(lines, run_id), lines_of(lines, run_id)
        repeated = steps_done_twice(lines, run_id)
        assert repeated == 0 or (run_id in held and repeated == 1), lines_of(lines, run_id)
        state = await survivor.http.get(f"/threads/{thread_id}/state")
        assert state.status_code == 200, state.text
        assert [d["node"] for d in state.json()["values"]["done"]] == list(STEP_NODES)
