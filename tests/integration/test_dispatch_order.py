"""Dispatch order with LangGraph's Priority API, in both modes (`runyard dev`'s in-process
queue, `runyard serve` on PostgreSQL and Redis): higher priority first, then first come
first served, with one worker slot so that runs queue behind each other."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.backends import backend_server
from tests.support.redis_keys import postgres_and_redis
from tests.support.server import ROOT, ServerProcess

pytestmark = pytest.mark.timeout(180)

PRIORITY_CONFIG = ROOT / "tests" / "graphs" / "langgraph_priority.json"
ONE_SLOT = {"WORKER_COUNT": "1", "N_JOBS_PER_WORKER": "1"}


@pytest.fixture(scope="module", params=["dev", "redis"])
def ordered_server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[ServerProcess, Path]]:
    """A server with one worker slot, and the file its `stamp` runs write in start order."""
    workdir = tmp_path_factory.mktemp(f"order-{request.param}")
    order = workdir / "order.txt"
    env = {**ONE_SLOT, "ORDER_FILE": str(order)}
    if request.param == "dev":
        with backend_server("sqlite", workdir, config=PRIORITY_CONFIG, env=env) as proc:
            yield proc, order
        return
    with postgres_and_redis("runyard_order") as deployment:
        proc = ServerProcess("serve", workdir, config=PRIORITY_CONFIG, env={**deployment, **env})
        try:
            yield proc.start(), order
        finally:
            proc.stop()


@pytest.fixture
async def http(ordered_server: tuple[ServerProcess, Path]) -> AsyncIterator[httpx.AsyncClient]:
    """A plain HTTP client for the server."""
    async with httpx.AsyncClient(base_url=ordered_server[0].url, timeout=30) as client:
        yield client


async def start_run(http: httpx.AsyncClient, body: dict[str, Any]) -> tuple[str, str]:
    """Create a background run on a new thread: (thread id, run id)."""
    thread = (await http.post("/threads", json={})).json()["thread_id"]
    created = await http.post(f"/threads/{thread}/runs", json=body)
    assert created.status_code == 200, created.text
    return thread, created.json()["run_id"]


async def until_running(http: httpx.AsyncClient, thread: str, run: str) -> None:
    """Wait until the run holds the worker slot."""
    for _ in range(300):
        status = (await http.get(f"/threads/{thread}/runs/{run}")).json()["status"]
        if status == "running":
            return
        await asyncio.sleep(0.1)
    pytest.fail(f"run {run} never started")


def started_with(order: Path, prefix: str) -> list[str]:
    """The tags of the `stamp` runs started so far whose tags start with `prefix`."""
    lines = order.read_text().split() if order.exists() else []
    return [line for line in lines if line.startswith(prefix)]


def stamp(tag: str, priority: int) -> dict[str, Any]:
    """A `stamp` run whose new thread the assign function gives `priority`."""
    metadata = {"assign": "set", "priority": priority}
    return {"assistant_id": "stamp", "input": {"tag": tag}, "metadata": metadata}


async def test_a_priority_minus_5_run_overtakes_queued_priority_0_runs(
    http: httpx.AsyncClient, ordered_server: tuple[ServerProcess, Path], tmp_path: Path
) -> None:
    order = ordered_server[1]
    gate = tmp_path / "gate"
    held = await start_run(http, {"assistant_id": "gate", "input": {"gate": str(gate)}})
    await until_running(http, *held)

    prefix = uuid.uuid4().hex[:6]
    queued = [await start_run(http, stamp(f"{prefix}-last", 5))]
    queued += [await start_run(http, stamp(f"{prefix}-p0-{n}", 0)) for n in range(5)]
    queued.append(await start_run(http, stamp(f"{prefix}-urgent", -5)))
    gate.touch()
    for thread, run in [held, *queued]:
        joined = await http.get(f"/threads/{thread}/runs/{run}/join")
        assert joined.status_code == 200, joined.text

    started = started_with(order, prefix)
    assert started == [
        f"{prefix}-urgent",
        *(f"{prefix}-p0-{n}" for n in range(5)),
        f"{prefix}-last",
    ]


async def test_a_small_group_starts_before_a_tenth_of_a_big_backlog(
    http: httpx.AsyncClient, ordered_server: tuple[ServerProcess, Path], tmp_path: Path
) -> None:
    order = ordered_server[1]
    gate = tmp_path / "gate"
    held = await start_run(http, {"assistant_id": "gate", "input": {"gate": str(gate)}})
    await until_running(http, *held)

    prefix = uuid.uuid4().hex[:6]
    backlog, small = 200, 5

    async def stateless(tag: str, group: str) -> None:
        metadata = {"assign": "set", "group": f"{prefix}-{group}"}
        body = {"assistant_id": "stamp", "input": {"tag": tag}, "metadata": metadata}
        created = await http.post("/runs", json=body)
        assert created.status_code == 200, created.text

    for start in range(0, backlog, 20):
        await asyncio.gather(*(stateless(f"{prefix}-a{n}", "a") for n in range(start, start + 20)))
    for n in range(small):
        await stateless(f"{prefix}-b{n}", "b")
    # Who is waiting, per group, as an operator sees it.
    snapshot = (await http.get("/metrics", params={"format": "json"})).json()
    waiting = {group["group"]: group["n_pending"] for group in snapshot["queue"]["groups"]}
    assert waiting[f"{prefix}-a"] == backlog and waiting[f"{prefix}-b"] == small
    exposition = (await http.get("/metrics")).text
    assert f'runyard_queue_group_pending{{group="{prefix}-a"}} {float(backlog)}' in exposition
    assert f'runyard_queue_group_oldest_wait_seconds{{group="{prefix}-b"}}' in exposition
    gate.touch()

    started: list[str] = []
    for _ in range(1200):
        started = started_with(order, prefix)
        if len(started) == backlog + small:
            break
        await asyncio.sleep(0.1)
    assert len(started) == backlog + small
    b_places = [place for place, tag in enumerate(started) if tag.startswith(f"{prefix}-b")]
    a_before_last_b = sum(1 for tag in started[: b_places[-1]] if tag.startswith(f"{prefix}-a"))
    assert len(b_places) == small
    assert a_before_last_b < backlog // 10


ORDERING_CONFIG = ROOT / "tests" / "graphs" / "langgraph_ordering.json"


@pytest.fixture(scope="module")
def keyed_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, Path]]:
    """`runyard dev` without priority.path, grouping runs by `metadata.tenant`."""
    workdir = tmp_path_factory.mktemp("order-keyed")
    order = workdir / "order.txt"
    env = {**ONE_SLOT, "ORDER_FILE": str(order), "RUNYARD_FAIRNESS_KEY": "tenant"}
    with backend_server("sqlite", workdir, config=ORDERING_CONFIG, env=env) as proc:
        yield proc, order


async def test_the_fairness_key_groups_runs_without_a_priority_path(
    keyed_server: tuple[ServerProcess, Path], tmp_path: Path
) -> None:
    server, order = keyed_server
    gate = tmp_path / "gate"
    prefix = uuid.uuid4().hex[:6]
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as http:
        held = await start_run(http, {"assistant_id": "gate", "input": {"gate": str(gate)}})
        await until_running(http, *held)
        runs = [(f"{prefix}-a{n}", "a") for n in range(60)] + [
            (f"{prefix}-b{n}", "b") for n in range(3)
        ]
        for tag, tenant in runs:
            body = {"assistant_id": "stamp", "input": {"tag": tag}, "metadata": {"tenant": tenant}}
            assert (await http.post("/runs", json=body)).status_code == 200
        gate.touch()
        started: list[str] = []
        for _ in range(600):
            started = started_with(order, prefix)
            if len(started) == len(runs):
                break
            await asyncio.sleep(0.1)
    assert len(started) == len(runs)
    # One slot, groups a and b in turn: b's three runs are among the first six to start.
    assert sorted(started.index(f"{prefix}-b{n}") for n in range(3)) == [1, 3, 5]
