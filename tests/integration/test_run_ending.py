"""Every attempt ends: a run whose end cannot be written, or whose node times out, is told."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from langgraph_sdk import get_client
from langgraph_sdk.client import LangGraphClient

from tests.support.runs import TERMINAL, new_thread, wait_for_status
from tests.support.server import ServerProcess


@pytest.mark.timeout(60)
async def test_a_run_whose_end_cannot_be_stored_does_not_hold_its_thread(
    client: LangGraphClient,
) -> None:
    """PostgreSQL refuses a NUL character in JSON: the run still ends, and the thread's next
    run executes, instead of the first one keeping its lease (and its thread) forever."""
    thread_id = await new_thread(client)
    first = await client.runs.create(thread_id, "nul", input={}, if_not_exists="create")
    run = await wait_for_status(client, thread_id, first["run_id"], TERMINAL, timeout=20)
    # SQLite stores the text; PostgreSQL cannot, and says why.
    if run["status"] != "success":
        assert run["status"] == "error", run
    after = await client.runs.create(thread_id, "fail", input={"value": 1})
    await wait_for_status(client, thread_id, after["run_id"], {"error"}, timeout=20)


JOB_TIMEOUT = 3.0


@pytest.fixture(scope="module")
def short_timeout_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """`runyard dev` with BG_JOB_TIMEOUT_SECS of a few seconds."""
    workdir = tmp_path_factory.mktemp("short-timeout")
    proc = ServerProcess("dev", workdir, env={"BG_JOB_TIMEOUT_SECS": str(JOB_TIMEOUT)}).start()
    try:
        yield proc
    finally:
        proc.stop()


@pytest.fixture
async def short_client(short_timeout_server: ServerProcess) -> AsyncIterator[LangGraphClient]:
    """A client of the short-timeout server."""
    lg = get_client(url=short_timeout_server.url, api_key=None)
    try:
        yield lg
    finally:
        await lg.http.client.aclose()


@pytest.mark.timeout(60)
async def test_a_node_raising_timeout_error_is_a_graph_error(
    short_client: LangGraphClient,
) -> None:
    """A node's own TimeoutError fails the run with its message; it is not the job timeout."""
    thread_id = await new_thread(short_client)
    run = await short_client.runs.create(
        thread_id, "node_timeout", input={}, if_not_exists="create"
    )
    ended = await wait_for_status(short_client, thread_id, run["run_id"], TERMINAL, timeout=30)
    assert ended["status"] == "error", ended
    # /join answers the run's error as the node raised it.
    joined = await short_client.runs.join(thread_id, run["run_id"])
    assert "model provider did not answer" in str(joined), joined


@pytest.mark.timeout(60)
async def test_the_job_timeout_covers_building_the_graph(short_client: LangGraphClient) -> None:
    """BG_JOB_TIMEOUT_SECS bounds the whole attempt, the graph factory included."""
    thread_id = await new_thread(short_client)
    config: Any = {"configurable": {"build_seconds": JOB_TIMEOUT + 10}}
    run = await short_client.runs.create(
        thread_id, "slow_build", input={}, config=config, if_not_exists="create"
    )
    ended = await wait_for_status(short_client, thread_id, run["run_id"], TERMINAL, timeout=30)
    assert ended["status"] == "timeout", ended
