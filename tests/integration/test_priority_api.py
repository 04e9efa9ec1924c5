"""LangGraph's Priority API: `priority.path` names a `langgraph_sdk.Priority` whose assign
function is called at the first run on a thread without settings, as langgraph-sdk 0.4.14
documents; its settings are stored on the thread; a failing function creates nothing."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.backends import backend_server
from tests.support.server import ROOT, ServerProcess

pytestmark = pytest.mark.timeout(120)

PRIORITY_CONFIG = ROOT / "tests" / "graphs" / "langgraph_priority.json"
QUICK = {"assistant_id": "slow", "input": {"seconds": 0}}


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def priority_server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[ServerProcess, Path]]:
    """A server whose langgraph.json names tests/graphs/priority.py, and its calls file."""
    workdir = tmp_path_factory.mktemp(f"priority-{request.param}")
    calls = workdir / "assign-calls.jsonl"
    env = {"PRIORITY_CALLS_FILE": str(calls)}
    with backend_server(request.param, workdir, config=PRIORITY_CONFIG, env=env) as proc:
        yield proc, calls


@pytest.fixture
async def http(priority_server: tuple[ServerProcess, Path]) -> AsyncIterator[httpx.AsyncClient]:
    """A plain HTTP client (no retries: a 500 must be seen as it is answered)."""
    async with httpx.AsyncClient(base_url=priority_server[0].url, timeout=30) as client:
        yield client


def calls_for(calls: Path, thread_id: str) -> list[dict[str, Any]]:
    """The assign calls made for runs on `thread_id`."""
    if not calls.exists():
        return []
    seen = [json.loads(line) for line in calls.read_text().splitlines() if line]
    return [call for call in seen if call["thread_id"] == thread_id]


async def new_thread(http: httpx.AsyncClient, **metadata: Any) -> str:
    """A new thread with `metadata`."""
    created = await http.post("/threads", json={"metadata": metadata})
    assert created.status_code == 200, created.text
    return str(created.json()["thread_id"])


async def join(http: httpx.AsyncClient, thread_id: str, run_id: str) -> None:
    """Wait for the run to end; it must succeed."""
    joined = await http.get(f"/threads/{thread_id}/runs/{run_id}/join")
    assert joined.status_code == 200, joined.text
    run = await http.get(f"/threads/{thread_id}/runs/{run_id}")
    assert run.json()["status"] == "success"


async def run_on(http: httpx.AsyncClient, thread_id: str, **metadata: Any) -> httpx.Response:
    """Create a background run of the quick graph on `thread_id`."""
    return await http.post(f"/threads/{thread_id}/runs", json={**QUICK, "metadata": metadata})


async def test_assign_is_called_once_per_thread_with_the_documented_context(
    http: httpx.AsyncClient, priority_server: tuple[ServerProcess, Path]
) -> None:
    calls = priority_server[1]
    thread_id = await new_thread(http, owner="acme")
    first = await run_on(http, thread_id, assign="set", priority=-2, group="acme")
    assert first.status_code == 200, first.text
    await join(http, thread_id, first.json()["run_id"])
    # The thread has settings now: an assign that would raise is not called again.
    second = await run_on(http, thread_id, assign="raise")
    assert second.status_code == 200, second.text
    await join(http, thread_id, second.json()["run_id"])

    seen = calls_for(calls, thread_id)
    assert len(seen) == 1
    assert seen[0]["identity"] == ""
    assert seen[0]["permissions"] == []
    assert seen[0]["thread_metadata"]["owner"] == "acme"
    assert seen[0]["graph_id"] == "slow"
    assert seen[0]["assistant_id"] == first.json()["assistant_id"]
    assert seen[0]["run_metadata"] == {"assign": "set", "priority": -2, "group": "acme"}
    assert seen[0]["cron_id"] is None


@pytest.mark.parametrize(
    ("how", "said"),
    [("raise", "raised RuntimeError: no tier for this customer"), ("bad", "priority 9")],
)
async def test_a_failing_assign_names_the_function_and_stores_nothing(
    http: httpx.AsyncClient, priority_server: tuple[ServerProcess, Path], how: str, said: str
) -> None:
    calls = priority_server[1]
    thread_id = await new_thread(http)
    refused = await run_on(http, thread_id, assign=how)
    assert refused.status_code == 500
    detail = refused.json()["detail"]
    assert "priority.py:assign" in detail and said in detail
    runs = await http.get(f"/threads/{thread_id}/runs")
    assert runs.json() == []
    thread = await http.get(f"/threads/{thread_id}")
    assert thread.json()["status"] == "idle"

    # Nothing was stored: the next first run on the thread asks the function again.
    accepted = await run_on(http, thread_id, assign="set", priority=1, group="later")
    assert accepted.status_code == 200, accepted.text
    await join(http, thread_id, accepted.json()["run_id"])
    assert [call["run_metadata"].get("assign") for call in calls_for(calls, thread_id)] == [
        how,
        "set",
    ]


async def test_a_failing_assign_does_not_create_the_thread_it_would_have_created(
    http: httpx.AsyncClient,
) -> None:
    thread_id = str(uuid.uuid4())
    refused = await http.post(
        f"/threads/{thread_id}/runs",
        json={**QUICK, "if_not_exists": "create", "metadata": {"assign": "raise"}},
    )
    assert refused.status_code == 500
    assert "priority.py:assign" in refused.json()["detail"]
    assert (await http.get(f"/threads/{thread_id}")).status_code == 404


async def test_a_stateless_run_is_assigned_without_a_thread_id(
    http: httpx.AsyncClient, priority_server: tuple[ServerProcess, Path]
) -> None:
    tag = str(uuid.uuid4())
    done = await http.post(
        "/runs/wait", json={**QUICK, "metadata": {"assign": "set", "priority": 5, "tag": tag}}
    )
    assert done.status_code == 200, done.text
    stateless = [
        call
        for call in calls_for(priority_server[1], None)
        if call["run_metadata"].get("tag") == tag
    ]
    assert len(stateless) == 1
