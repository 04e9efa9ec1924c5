"""SIGTERM hands work over: in-flight runs finish in the grace period or resume elsewhere."""

from __future__ import annotations

import asyncio
import signal
import time

import httpx
import pytest

from tests.chaos.cluster import (
    ClusterFactory,
    RunRef,
    done_counts,
    lines_of,
    submit,
    wait_terminal,
    wait_until,
)

DRAIN = 2.0
# A lease far longer than the test's bound: if runs resume quickly, it is because the
# draining instance released them, not because their lease expired.
LEASE = 30.0


@pytest.mark.slow
@pytest.mark.timeout(150)
async def test_sigterm_finishes_or_hands_over_runs_in_flight(
    cluster_factory: ClusterFactory,
) -> None:
    """Short runs may finish on the draining instance; long ones resume elsewhere at once."""
    cluster = await cluster_factory(
        2, LEASE_DURATION_SECONDS=str(LEASE), WORKER_DRAIN_TIMEOUT=str(DRAIN)
    )
    a, b = cluster.instances
    long_refs: list[RunRef] = []
    short_refs: list[RunRef] = []
    for index in range(4):
        long_refs.append(await submit((a, b)[index % 2], "steps", cluster.steps_input(1.5)))
    for index in range(4):
        short_refs.append(await submit((a, b)[index % 2], "steps", cluster.steps_input(0.1)))
    refs = long_refs + short_refs
    long_ids = [run_id for _, run_id in long_refs]

    # The victim holds a long run that still has at least three nodes to go.
    def victim_pid() -> int | None:
        lines = cluster.log_lines()
        for run_id in long_ids:
            mine = lines_of(lines, run_id)
            if mine and len(lines_of(mine, run_id, phase="done")) <= 2:
                return int(mine[-1]["pid"])
        return None

    await wait_until(lambda: victim_pid() is not None, 30, "a long run to start")
    victim = cluster.by_pid(victim_pid())  # type: ignore[arg-type]
    survivor = cluster.other(victim)
    in_flight = {
        run_id
        for _, run_id in refs
        if (mine := lines_of(cluster.log_lines(), run_id))
        and mine[-1]["pid"] == victim.pid
        and len(lines_of(mine, run_id, phase="done")) < 5
    }
    probes: list[str] = []
    probing = asyncio.create_task(probe_readiness(victim.http, probes))
    await asyncio.sleep(0.2)
    terminated_at = time.monotonic()
    terminated_wall = time.time()
    victim.signal(signal.SIGTERM)

    final = await wait_terminal(cluster, refs, timeout=40)
    handed_over_in = time.monotonic() - terminated_at
    assert set(final.values()) == {"success"}, f"{final}\n{cluster.tails()}"
    assert handed_over_in < LEASE - 5, f"runs took {handed_over_in:.1f} s: did the lease expire?"

    await asyncio.wait_for(probing, 10)
    # uvicorn closes its listener and idle connections within one tick of SIGTERM, before
    # the drain, so a 503 is only seen if a probe lands in that tick; never 200 after it.
    assert probes[-1] == "closed", probes
    first_503 = probes.index("503") if "503" in probes else len(probes)
    assert "200" not in probes[first_503:], probes

    proc = victim.server.process
    assert proc is not None
    exit_code = await asyncio.to_thread(proc.wait, DRAIN + 15)
    # uvicorn re-raises the signal it caught after a graceful shutdown.
    assert exit_code in (0, -signal.SIGTERM), victim.log_tail()
    log = victim.log_tail(200_000)
    assert "worker_pool_stopped" in log and "Application shutdown complete" in log, log[-3000:]
    assert "Traceback" not in log, log[-3000:]

    lines = cluster.log_lines()
    finished_here, resumed = [], []
    for _, run_id in refs:
        assert done_counts(lines, run_id) == {f"s{i}": 1 for i in range(1, 6)}, lines_of(
            lines, run_id
        )
        if run_id not in in_flight:
            continue
        after = [line for line in lines_of(lines, run_id) if line["t"] > terminated_wall]
        if all(line["pid"] == victim.pid for line in after):
            finished_here.append(run_id)
            last_done = max(line["t"] for line in lines_of(lines, run_id, phase="done"))
            assert last_done - terminated_wall < DRAIN + 1.0
        else:
            resumed.append(run_id)
            # The victim may complete a node within the grace period, never after it.
            late = [
                line
                for line in after
                if line["pid"] == victim.pid and line["t"] - terminated_wall > DRAIN + 1.0
            ]
            assert not late, late
            assert {line["attempt"] for line in after if line["pid"] == survivor.pid} == {2}
    assert resumed, "a long run in flight on the victim should have resumed elsewhere"
    print(
        f"sigterm: in_flight={len(in_flight)} finished_on_victim={len(finished_here)} "
        f"resumed_elsewhere={len(resumed)} all_done_in={handed_over_in:.1f}s exit={exit_code} "
        f"readyz_503_seen={probes.count('503')}"
    )


async def probe_readiness(http: httpx.AsyncClient, seen: list[str]) -> None:
    """GET /readyz on a kept-alive connection until the server stops answering."""
    while True:
        try:
            seen.append(str((await http.get("/readyz", timeout=2)).status_code))
        except httpx.HTTPError:
            seen.append("closed")
            return
        await asyncio.sleep(0.005)
