"""Health probes, Prometheus metrics and structured logs of a real server, through HTTP."""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from langgraph_sdk.client import LangGraphClient

from tests.support.databases import fresh_database as new_database
from tests.support.metrics import Samples, scrape, value
from tests.support.runs import TERMINAL, new_thread, wait_for_status
from tests.support.server import ServerProcess
from tests.support.throwaway import ThrowawayPostgres, ThrowawayRedis, postgres_tools


def names_of(samples: Samples) -> set[str]:
    """The sample names present."""
    return {name for name, _ in samples}


async def poll(check: Callable[[], Any], timeout: float, what: str) -> Any:
    """Await `check()` until it returns something truthy; fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = await check()
        if last:
            return last
        await asyncio.sleep(0.2)
    pytest.fail(f"timed out after {timeout:g} s waiting for {what}; last: {last!r}")


# --- probes -------------------------------------------------------------------------------


async def test_probes_answer_healthy(base_url: str) -> None:
    async with httpx.AsyncClient(base_url=base_url) as http:
        livez = await http.get("/livez")
        readyz = await http.get("/readyz")
        health = await http.get("/health")
        ok = await http.get("/ok")
    assert livez.status_code == 200
    assert livez.json() == {"status": "ok", "loops_alive": True}
    assert readyz.status_code == 200
    body = readyz.json()
    assert body["status"] == "ok"
    assert body["database"] == body["migrations"] == body["draining"] == "ok"
    assert health.status_code == 200
    assert health.json() == ok.json() == {"ok": True}


# --- metrics ------------------------------------------------------------------------------


async def test_metrics_count_a_runs_lifecycle(client: LangGraphClient, base_url: str) -> None:
    async with httpx.AsyncClient(base_url=base_url, timeout=30) as http:
        before = await scrape(http)
        thread_id = await new_thread(client)
        ok_run = await client.runs.create(thread_id, "agent", input={"messages": []})
        await client.runs.join(thread_id, ok_run["run_id"])
        failing = await client.runs.create(thread_id, "fail", input={"value": 1})
        await client.runs.join(thread_id, failing["run_id"])

        # The worker times its final write around the commit, so a joined run's end is
        # visible a moment before the finalize histogram counts it: scrape until it has.
        async def finalized() -> Samples | None:
            samples = await scrape(http)
            count = "runyard_run_finalize_seconds_count"
            return samples if value(samples, count) - value(before, count) >= 2 else None

        after = await poll(finalized, 30, "both runs' finalize to be counted")

    def delta(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    assert (await client.runs.get(thread_id, failing["run_id"]))["status"] == "error"
    assert delta("runyard_runs_finished_total", status="success") >= 1
    assert delta("runyard_runs_finished_total", status="error") >= 1
    for step in ("claim", "execution", "finalize"):
        assert delta(f"runyard_run_{step}_seconds_count") >= 2, step
    assert delta("runyard_run_execution_seconds_sum") > 0
    # Latency is recorded under the route template, never under a raw id.
    runs_route = "/threads/{thread_id}/runs"
    key = {"method": "POST", "route": runs_route, "status": "200"}
    assert delta("runyard_http_request_duration_seconds_count", **key) >= 2
    routes = {dict(labels).get("route") for _, labels in after}
    assert not any(thread_id in str(route) for route in routes)
    present = names_of(after)
    for name in (
        "runyard_queue_depth",
        "runyard_runs_in_flight",
        "runyard_stream_subscribers",
        "runyard_lease_renewals_total",
        "runyard_instance_info",
    ):
        assert name in present, name
    assert value(after, "runyard_queue_depth") >= 0


async def test_metrics_show_runs_in_flight_and_stream_subscribers(
    client: LangGraphClient, base_url: str
) -> None:
    thread_id = await new_thread(client)
    # Two 1.5 s steps: long enough for a lease renewal (heartbeat every 2 s).
    run = await client.runs.create(thread_id, "slow", input={"seconds": 1.5})
    await wait_for_status(client, thread_id, run["run_id"], {"running"})
    async with httpx.AsyncClient(base_url=base_url, timeout=30) as http:
        before = await scrape(http)
        path = f"/threads/{thread_id}/runs/{run['run_id']}/stream"
        async with http.stream("GET", path) as stream:
            assert stream.status_code == 200
            during = await scrape(http)
            async for _ in stream.aiter_bytes():
                pass
        await wait_for_status(client, thread_id, run["run_id"], TERMINAL)
        after = await scrape(http)
    assert value(during, "runyard_runs_in_flight") >= 1
    assert value(during, "runyard_stream_subscribers") >= 1
    assert value(after, "runyard_lease_renewals_total") > value(
        before, "runyard_lease_renewals_total"
    )


# --- structured logs ----------------------------------------------------------------------


async def test_log_lines_about_a_run_carry_its_identity(
    server: ServerProcess, client: LangGraphClient
) -> None:
    thread_id = await new_thread(client)
    run = await client.runs.create(thread_id, "agent", input={"messages": []})
    await client.runs.join(thread_id, run["run_id"])
    run_id = run["run_id"]

    async def lines_of_run() -> list[str]:
        text = server.log_path.read_text(errors="replace")
        return [line for line in text.splitlines() if run_id in line]

    lines = await poll(lines_of_run, 5, "log lines of the run")
    if server.mode == "serve":
        # Production logs are JSON lines with the run's identity as fields.
        records = [json.loads(line) for line in lines if line.startswith("{")]
        events = {record.get("event"): record for record in records}
        assert {"run_created", "run_claimed", "run_finished"} <= set(events)
        for name in ("run_claimed", "run_finished"):
            record = events[name]
            assert record["run_id"] == run_id
            assert record["thread_id"] == thread_id
            assert record["attempt"] == 1
            assert record["instance"]
        assert events["run_finished"]["status"] == "success"
    else:
        # Dev logs stay readable lines, still with every field spelled out.
        finished = next(line for line in lines if "run_finished" in line)
        assert f"run_id={run_id}" in finished
        assert f"thread_id={thread_id}" in finished
        assert "attempt=1" in finished


# --- outages: private Redis and PostgreSQL that the test may stop ------------------------


@pytest.fixture
def throwaway_redis() -> Iterator[ThrowawayRedis]:
    """A redis-server of this test's own."""
    instance = ThrowawayRedis().start()
    try:
        yield instance
    finally:
        instance.stop()


@pytest.fixture
def fresh_database() -> Iterator[str]:
    """A new database on the shared PostgreSQL server."""
    with new_database("runyard_obs") as url:
        yield url


@pytest.fixture
async def serve_factory(tmp_path: Path) -> AsyncIterator[Callable[..., ServerProcess]]:
    """Starts `runyard serve` processes with the given environment; stops them afterwards."""
    started: list[ServerProcess] = []

    def make(**env: str) -> ServerProcess:
        proc = ServerProcess("serve", tmp_path / f"serve-{len(started)}", env=env)
        started.append(proc)
        return proc.start()

    try:
        yield make
    finally:
        for proc in started:
            proc.stop()


async def readyz(http: httpx.AsyncClient) -> tuple[int, dict[str, Any]]:
    """Status code and body of GET /readyz."""
    response = await http.get("/readyz", timeout=10)
    return response.status_code, response.json()


async def test_readyz_fails_while_redis_is_down_and_recovers(
    throwaway_redis: ThrowawayRedis,
    fresh_database: str,
    serve_factory: Callable[..., ServerProcess],
) -> None:
    server = await asyncio.to_thread(
        serve_factory, DATABASE_URL=fresh_database, REDIS_URL=throwaway_redis.url
    )
    async with httpx.AsyncClient(base_url=server.url) as http:
        status, body = await readyz(http)
        assert (status, body["redis"]) == (200, "ok")
        assert value(await scrape(http), "runyard_queue_depth") == 0

        throwaway_redis.stop()

        async def unready() -> dict[str, Any] | None:
            status, body = await readyz(http)
            return body if status == 503 else None

        body = await poll(unready, 10, "/readyz to fail with Redis down")
        assert body["status"] == "unavailable"
        assert body["redis"].startswith("unreachable")
        assert body["database"] == "ok"
        assert math.isnan(value(await scrape(http), "runyard_queue_depth"))
        # Liveness is about this process, not its dependencies.
        assert (await http.get("/livez")).status_code == 200

        throwaway_redis.start()

        async def ready() -> bool:
            return (await readyz(http))[0] == 200

        await poll(ready, 15, "/readyz to recover once Redis is back")


async def test_readyz_fails_while_postgres_is_down_and_recovers(
    serve_factory: Callable[..., ServerProcess],
) -> None:
    tools = postgres_tools()
    if tools is None:
        pytest.skip("initdb/pg_ctl not installed: the PostgreSQL outage is not covered here")
    database = await asyncio.to_thread(ThrowawayPostgres(tools).init)
    try:
        server = await asyncio.to_thread(serve_factory, DATABASE_URL=database.url, REDIS_URL="")
        async with httpx.AsyncClient(base_url=server.url) as http:
            status, body = await readyz(http)
            assert (status, body["database"], body["migrations"]) == (200, "ok", "ok")

            await asyncio.to_thread(database.stop)

            async def unready() -> dict[str, Any] | None:
                status, body = await readyz(http)
                return body if status == 503 else None

            body = await poll(unready, 10, "/readyz to fail with PostgreSQL down")
            assert body["database"].startswith("unreachable")
            assert body["migrations"].startswith("unknown")
            # A database outage must not kill the instance's background loops.
            await asyncio.sleep(2.5)
            livez = await http.get("/livez")
            assert livez.status_code == 200, livez.text

            await asyncio.to_thread(database.start)

            async def ready() -> bool:
                return (await readyz(http))[0] == 200

            await poll(ready, 15, "/readyz to recover once PostgreSQL is back")
    finally:
        await asyncio.to_thread(database.destroy)


async def test_reaper_counts_runs_recovered_from_a_dead_instance(
    throwaway_redis: ThrowawayRedis,
    fresh_database: str,
    serve_factory: Callable[..., ServerProcess],
) -> None:
    fast = {
        "DATABASE_URL": fresh_database,
        "REDIS_URL": throwaway_redis.url,
        "LEASE_DURATION_SECONDS": "2",
        "HEARTBEAT_INTERVAL_SECONDS": "0.5",
        "REAPER_INTERVAL_SECONDS": "0.5",
    }
    doomed = await asyncio.to_thread(serve_factory, **fast)
    survivor = await asyncio.to_thread(serve_factory, **fast, WORKER_COUNT="0")
    async with httpx.AsyncClient(base_url=doomed.url, timeout=30) as http:
        thread = (await http.post("/threads", json={})).json()
        created = await http.post(
            f"/threads/{thread['thread_id']}/runs",
            json={"assistant_id": "slow", "input": {"seconds": 30}},
        )
        run_id = created.json()["run_id"]

        async def running() -> bool:
            run = (await http.get(f"/threads/{thread['thread_id']}/runs/{run_id}")).json()
            return bool(run["status"] == "running")

        await poll(running, 10, "the run to start on the doomed instance")
    assert doomed.process is not None
    doomed.process.kill()
    doomed.process.wait(timeout=10)
    async with httpx.AsyncClient(base_url=survivor.url, timeout=30) as http:

        async def reaped() -> float:
            return value(await scrape(http), "runyard_runs_reaped_total", status="pending")

        assert await poll(reaped, 15, "the survivor's reaper to recover the run") >= 1
