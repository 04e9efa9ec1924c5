"""Per-fairness-group caps, through real servers: two `runyard serve` instances on one
PostgreSQL database and Redis, and `runyard dev`. The database is sampled while runs
execute; no sample may show more of a group's runs running than its cap."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import psycopg
import pytest

from tests.support.redis_keys import postgres_and_redis
from tests.support.server import ROOT, ServerProcess, start_together

PRIORITY_CONFIG = ROOT / "tests" / "graphs" / "langgraph_priority.json"
LIMITS = {"capped": {"max_running": 3}, "rated": {"max_starts_per_minute": 2}}
CAPS_ENV = {"RUNYARD_GROUP_LIMITS": json.dumps(LIMITS)}


async def create_run(http: httpx.AsyncClient, group: str, seconds: float) -> tuple[str, str]:
    """A `slow` run (two steps of `seconds`) on a new thread, in fairness group `group`."""
    thread = str(uuid.uuid4())
    body = {
        "assistant_id": "slow",
        "input": {"seconds": seconds},
        "metadata": {"assign": "set", "group": group},
        "if_not_exists": "create",
    }
    created = await http.post(f"/threads/{thread}/runs", json=body)
    assert created.status_code == 200, created.text
    return thread, created.json()["run_id"]


async def run_statuses(http: httpx.AsyncClient, refs: list[tuple[str, str]]) -> list[Any]:
    """Each run as the API returns it."""
    answers = await asyncio.gather(*(http.get(f"/threads/{t}/runs/{r}") for t, r in refs))
    for answer in answers:
        assert answer.status_code == 200, answer.text
    return [answer.json() for answer in answers]


@pytest.fixture(scope="module")
def two_instances(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, list[str]]]:
    """Two `runyard serve` instances sharing PostgreSQL and Redis, with the caps above:
    (database URL, base URLs)."""
    workdir = tmp_path_factory.mktemp("caps-serve")
    with postgres_and_redis("runyard_caps") as deployment:
        env = {**deployment, **CAPS_ENV}
        procs = [ServerProcess("serve", workdir, config=PRIORITY_CONFIG, env=env) for _ in "ab"]
        start_together(procs)
        try:
            yield deployment["DATABASE_URL"], [proc.url for proc in procs]
        finally:
            for proc in procs:
                proc.stop()


def running_in(database_url: str, group: str) -> int:
    """How many runs of `group` the database says are running now."""
    with psycopg.connect(database_url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM runs WHERE status = 'running' AND fairness_group = %s",
            (group,),
        ).fetchone()
    assert row is not None
    return int(row[0])


@pytest.mark.timeout(240)
async def test_a_cap_of_3_holds_across_two_instances_and_spares_other_groups(
    two_instances: tuple[str, list[str]],
) -> None:
    database_url, urls = two_instances
    clients = [httpx.AsyncClient(base_url=url, timeout=30) for url in urls]
    try:
        first, second = clients
        capped = [
            await create_run(clients[n % 2], "capped", 0.4)
            for n in range(30)  # about 10 s at 3 at a time
        ]
        free = [await create_run(second, "free", 0.1) for _ in range(3)]

        samples: list[int] = []
        stop = asyncio.Event()

        async def sample() -> None:
            while not stop.is_set():
                samples.append(await asyncio.to_thread(running_in, database_url, "capped"))
                await asyncio.sleep(0.02)

        sampler = asyncio.create_task(sample())
        seen_held = False
        free_done_while_capped_waits = False
        try:
            for _ in range(1500):
                runs = await run_statuses(first, capped)
                free_runs = await run_statuses(first, free)
                pending = [run for run in runs if run["status"] == "pending"]
                seen_held = seen_held or any(
                    run["held_back"] and "at its max_running (3)" in run["held_back"]
                    for run in pending
                )
                if all(run["status"] == "success" for run in free_runs) and pending:
                    free_done_while_capped_waits = True
                if all(run["status"] in ("success", "error") for run in runs):
                    break
                await asyncio.sleep(0.1)
        finally:
            stop.set()
            await sampler
    finally:
        for client in clients:
            await client.aclose()
    assert [run["status"] for run in runs] == ["success"] * len(capped)
    # Sampled from the database all along: never more than the cap running at once.
    assert samples and max(samples) <= 3, max(samples)
    assert 3 in samples, sorted(set(samples))
    # A run held back says why while it is pending; once claimed it no longer does.
    assert seen_held
    assert all(run["held_back"] is None for run in runs)
    # The capped group's backlog did not hold the other group back.
    assert free_done_while_capped_waits


@pytest.fixture(scope="module")
def dev_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """`runyard dev` (SQLite, in-process queue) with the caps above."""
    workdir = tmp_path_factory.mktemp("caps-dev")
    proc = ServerProcess("dev", workdir, config=PRIORITY_CONFIG, env=CAPS_ENV)
    try:
        yield proc.start()
    finally:
        proc.stop()


@pytest.mark.timeout(120)
async def test_dev_mode_caps_running_runs_and_ends_every_run(dev_server: ServerProcess) -> None:
    async with httpx.AsyncClient(base_url=dev_server.url, timeout=30) as http:
        refs = [await create_run(http, "capped", 0.3) for _ in range(8)]
        most_running = 0
        seen_held = False
        for _ in range(600):
            runs = await run_statuses(http, refs)
            most_running = max(most_running, sum(run["status"] == "running" for run in runs))
            seen_held = seen_held or any(
                run["status"] == "pending" and run["held_back"] for run in runs
            )
            if all(run["status"] == "success" for run in runs):
                break
            await asyncio.sleep(0.05)
    assert [run["status"] for run in runs] == ["success"] * len(refs)
    assert 0 < most_running <= 3
    assert seen_held


@pytest.mark.timeout(120)
async def test_dev_mode_caps_starts_per_minute_and_says_so(dev_server: ServerProcess) -> None:
    async with httpx.AsyncClient(base_url=dev_server.url, timeout=30) as http:
        refs = [await create_run(http, "rated", 0.0) for _ in range(4)]
        runs: list[Any] = []
        for _ in range(300):
            runs = await run_statuses(http, refs)
            done = [run for run in runs if run["status"] == "success"]
            held = [run for run in runs if run["status"] == "pending" and run["held_back"]]
            if len(done) == 2 and len(held) == 2:
                break
            await asyncio.sleep(0.05)
        # Two started within the minute; the others wait for the window, saying why.
        assert sorted(run["status"] for run in runs) == ["pending", "pending", "success", "success"]
        for run in runs:
            if run["status"] == "pending":
                assert "at its max_starts_per_minute (2)" in run["held_back"]
        # Still pending a moment later: held, not lost and not spinning through claims.
        await asyncio.sleep(1.0)
        again = await run_statuses(http, refs)
        assert sorted(run["status"] for run in again) == sorted(run["status"] for run in runs)
