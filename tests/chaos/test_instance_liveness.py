"""A dead instance is known dead at once (its PostgreSQL session ended), at default settings:
its runs resume elsewhere before their leases could have expired. An instance cut off from
PostgreSQL (a TCP proxy of the test's own, stopped) loses its runs the same way, writes
nothing stale, and takes its lock back and claims again once the network returns.

Timing is read from what the system records, not from a bound on the wall clock: the
resumed attempt's first step (the steps' log) is compared with the lease the killed attempt
held (`runs.lease_expires_at`, read before the fault; the database and the test share this
machine's clock). Both are a lease (8 s) apart without liveness; the margin is printed.
"""

from __future__ import annotations

import asyncio
import json
import signal
import time
from collections import Counter

import pytest

from tests.chaos.cluster import (
    DEFAULT_ENV,
    Cluster,
    ClusterFactory,
    Instance,
    RunRef,
    done_counts,
    lines_of,
    submit,
    wait_until,
)
from tests.chaos.test_crash_recovery import executing_pid, mid_node
from tests.support.metrics import scrape, value
from tests.support.tcp_proxy import TcpProxy

LEASE = float(DEFAULT_ENV["LEASE_DURATION_SECONDS"])
STEP = 2.0


def liveness_sessions_trusted(cluster: Cluster, count: int) -> bool:
    """True once `count` instances hold liveness sessions a lease old: a reaper judges
    others only then (after a start, or a restart of the database)."""
    rows = cluster.sql(
        "SELECT count(*) FILTER (WHERE backend_start <= now() - make_interval(secs => %s)) "
        "FROM pg_stat_activity WHERE datname = current_database() "
        "AND application_name LIKE 'runyard liveness %%'",
        LEASE,
    )
    return int(rows[0][0]) >= count


def leases(cluster: Cluster, run_ids: list[str]) -> dict[str, tuple[str, float]]:
    """Run id → (owner, lease expiry as a Unix time) of running runs."""
    rows = cluster.sql(
        "SELECT run_id, owner, extract(epoch FROM lease_expires_at) FROM runs "
        "WHERE run_id = ANY(%s) AND status = 'running'",
        run_ids,
    )
    return {str(run_id): (str(owner), float(expiry)) for run_id, owner, expiry in rows}


def sql_statuses(cluster: Cluster, refs: list[RunRef]) -> dict[str, str]:
    rows = cluster.sql(
        "SELECT run_id, status FROM runs WHERE run_id = ANY(%s)", [run_id for _, run_id in refs]
    )
    return {str(run_id): str(status) for run_id, status in rows}


async def ended(cluster: Cluster, refs: list[RunRef], timeout: float = 90) -> dict[str, str]:
    """Every run's status once all ended, read from the database (an instance cut off from
    it cannot answer)."""
    terminal = {"success", "error", "interrupted", "timeout"}
    await wait_until(
        lambda: set(sql_statuses(cluster, refs).values()) <= terminal,
        timeout,
        "every run to end",
        interval=0.2,
    )
    return sql_statuses(cluster, refs)


def resumed_at(cluster: Cluster, run_id: str, survivor: Instance) -> float:
    """When the survivor started its first step of the run (a Unix time)."""
    starts = lines_of(cluster.log_lines(), run_id, phase="start", pid=survivor.pid)
    assert starts, lines_of(cluster.log_lines(), run_id)
    return min(line["t"] for line in starts)


async def victims_mid_node(cluster: Cluster, refs: list[RunRef], victim: Instance) -> list[str]:
    """The victim's runs, once each is inside a step with one done before it, and every
    instance's liveness is trusted."""
    run_ids = [run_id for _, run_id in refs]
    await wait_until(
        lambda: all(lines_of(cluster.log_lines(), r) for r in run_ids), 60, "every run to start"
    )
    mine = [r for r in run_ids if executing_pid(cluster.log_lines(), r) == victim.pid]
    assert mine, "the victim executes none of the runs"

    def ready() -> bool:
        now = cluster.log_lines()
        return (
            liveness_sessions_trusted(cluster, len(cluster.instances))
            and all(mid_node(now, r, victim.pid) for r in mine)
            and all(lines_of(now, r, phase="done") for r in mine)
        )

    await wait_until(ready, 60, "the victim's runs to be mid-step", interval=0.05)
    return mine


def assert_resumed_before_leases(
    cluster: Cluster, held: dict[str, tuple[str, float]], survivor: Instance, fault_at: float
) -> None:
    margins = {}
    for run_id, (_owner, expiry) in held.items():
        resumed = resumed_at(cluster, run_id, survivor)
        assert resumed < expiry, (
            f"run {run_id} resumed {resumed - fault_at:.2f} s after the fault, when its lease "
            f"(expiring {expiry - fault_at:.2f} s after it) could have expired"
        )
        margins[run_id] = (round(resumed - fault_at, 2), round(expiry - fault_at, 2))
    print(json.dumps({"resumed_s_and_lease_left_s": margins}))


def assert_each_step_done_once_after(cluster: Cluster, run_ids: list[str], fault_at: float) -> None:
    """Resume, don't restart: no step that was done before the fault ran again."""
    lines = cluster.log_lines()
    for run_id in run_ids:
        assert set(done_counts(lines, run_id)) == {f"s{i}" for i in range(1, 6)}
        kept = {
            line["node"] for line in lines_of(lines, run_id, phase="done") if line["t"] < fault_at
        }
        again = [
            line
            for line in lines_of(lines, run_id, phase="start")
            if line["node"] in kept and line["t"] > fault_at
        ]
        assert not again, f"done steps of {run_id} ran again: {again}"


@pytest.mark.slow
@pytest.mark.timeout(180)
async def test_a_killed_instance_runs_resume_before_their_leases_expire(
    cluster_factory: ClusterFactory,
) -> None:
    cluster = await cluster_factory(2, **DEFAULT_ENV)
    a, b = cluster.instances
    refs = [await submit((a, b)[i % 2], "steps", cluster.steps_input(STEP)) for i in range(4)]
    await wait_until(
        lambda: all(lines_of(cluster.log_lines(), r) for _, r in refs), 60, "every run to start"
    )
    owners = Counter(executing_pid(cluster.log_lines(), r) for _, r in refs)
    victim = cluster.by_pid(owners.most_common(1)[0][0])  # type: ignore[arg-type]
    survivor = cluster.other(victim)
    mine = await victims_mid_node(cluster, refs, victim)
    held = leases(cluster, mine)
    victim.kill()
    killed_at = time.time()

    final = await ended(cluster, refs)
    assert set(final.values()) == {"success"}, f"{final}\n{cluster.tails()}"
    assert_resumed_before_leases(cluster, held, survivor, killed_at)
    assert_each_step_done_once_after(cluster, mine, killed_at)
    gone = {owner for owner, _ in held.values()}
    log = survivor.log_tail(1_000_000)
    assert all(f"instance_gone owner={owner}" in log for owner in gone), log[-3000:]


@pytest.mark.slow
@pytest.mark.timeout(240)
async def test_an_instance_cut_off_from_postgres_loses_its_runs_and_comes_back(
    cluster_factory: ClusterFactory,
) -> None:
    cluster = await cluster_factory(1, **DEFAULT_ENV)
    (direct,) = cluster.instances
    port = int(cluster.database_url.rsplit(":", 1)[1].split("/", 1)[0])
    proxy = TcpProxy(port).start()
    try:
        via_proxy = cluster.database_url.replace(f":{port}/", f":{proxy.port}/")
        cut_off = await asyncio.to_thread(cluster.add, DATABASE_URL=via_proxy)
        await _cut_and_restore(cluster, proxy, cut_off, direct)
    finally:
        proxy.stop()


async def _cut_and_restore(
    cluster: Cluster, proxy: TcpProxy, cut_off: Instance, direct: Instance
) -> None:
    refs = [await submit(direct, "steps", cluster.steps_input(STEP)) for _ in range(6)]
    mine = await victims_mid_node(cluster, refs, cut_off)
    held = leases(cluster, mine)
    proxy.cut()
    cut_at = time.time()

    final = await ended(cluster, refs)
    assert set(final.values()) == {"success"}, f"{final}\n{cluster.tails()}"
    assert_resumed_before_leases(cluster, held, direct, cut_at)
    assert_each_step_done_once_after(cluster, mine, cut_at)
    (owner,) = {owner for owner, _ in held.values()}
    assert f"instance_gone owner={owner}" in direct.log_tail(1_000_000)
    assert "instance_liveness_lost" in cut_off.log_tail(1_000_000)

    # Its attempts, cut off, end: they stand down, or fail to hand their runs back.
    async def idle() -> bool:
        return value(await scrape(cut_off.http), "runyard_runs_in_flight") == 0

    await wait_until(idle, 2 * LEASE + 10, "the cut-off attempts to end")
    before = cluster.sql("SELECT run_id, status, attempt, output FROM runs ORDER BY run_id")

    proxy.restore()
    await wait_until(
        lambda: (
            cut_off.log_tail(200_000).rfind("instance_liveness_held")
            > cut_off.log_tail(200_000).rfind("instance_liveness_lost")
        ),
        30,
        "the instance to take its lock back",
    )
    assert cluster.sql("SELECT run_id, status, attempt, output FROM runs ORDER BY run_id") == before
    for run_id in mine:
        stored = sql_statuses(cluster, [("", run_id)])
        assert stored == {run_id: "success"}
    # It claims again: with the other instance paused, a new run is executed by it.
    direct.signal(signal.SIGSTOP)
    try:
        again = await submit(cut_off, "steps", cluster.steps_input(0.2))
        assert set((await ended(cluster, [again])).values()) == {"success"}
    finally:
        direct.signal(signal.SIGCONT)
    assert executing_pid(cluster.log_lines(), again[1]) == cut_off.pid
