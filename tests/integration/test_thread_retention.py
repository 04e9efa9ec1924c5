"""Thread retention: ttl on create and update (delete, keep_latest), include=ttl, the sweeper,
checkpointer.ttl in langgraph.json (default TTL and sweep interval), POST /threads/prune."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from datetime import datetime
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_client
from langgraph_sdk.client import LangGraphClient

from tests.support.backends import backend_server
from tests.support.runs import new_tag, state, status_error, wait_for_status
from tests.support.server import ROOT, ServerProcess

RETENTION_CONFIG = ROOT / "tests" / "graphs" / "langgraph_retention.json"
DEFAULT_TTL = 0.05  # minutes, from RETENTION_CONFIG
LONG_TTL = 600.0  # minutes: never expires during a test
EXPIRY_TIMEOUT = 30.0


@pytest.fixture(scope="module")
def retention_server(
    server: ServerProcess, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    """A server of `server`'s backend whose langgraph.json sets checkpointer.ttl."""
    workdir = tmp_path_factory.mktemp("retention")
    with backend_server(server.backend, workdir, RETENTION_CONFIG) as proc:
        yield proc


@pytest.fixture
async def ttl_client(retention_server: ServerProcess) -> AsyncIterator[LangGraphClient]:
    """A langgraph-sdk client for the retention server."""
    lg = get_client(url=retention_server.url, api_key=None)
    try:
        yield lg
    finally:
        await lg.http.client.aclose()


async def gone(client: LangGraphClient, thread_id: str) -> bool:
    """True once the thread answers 404."""
    try:
        await client.threads.get(thread_id)
    except httpx.HTTPStatusError as exc:
        if exc.response.status_code == 404:
            return True
        raise
    return False


async def until(check: Any, what: str, timeout: float = EXPIRY_TIMEOUT) -> None:
    """Poll an async check until it is true; fail naming `what` after `timeout`."""
    deadline = time.monotonic() + timeout
    while not await check():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        await asyncio.sleep(0.2)


def ttl_of(thread: Any) -> dict[str, Any]:
    """The `ttl` of a thread read with include=["ttl"]."""
    return dict(thread["ttl"])


async def test_include_ttl_shows_the_thread_ttl(client: LangGraphClient) -> None:
    created = await client.threads.create(ttl={"ttl": LONG_TTL, "strategy": "keep_latest"})
    thread = await client.threads.get(created["thread_id"], include=["ttl"])
    ttl = ttl_of(thread)
    assert ttl["strategy"] == "keep_latest"
    assert ttl["ttl_minutes"] == LONG_TTL
    expires = datetime.fromisoformat(ttl["expires_at"])
    created_at = datetime.fromisoformat(str(thread["created_at"]))
    assert abs((expires - created_at).total_seconds() - LONG_TTL * 60) < 60
    plain = await client.threads.get(created["thread_id"])
    assert "ttl" not in plain
    no_ttl = await client.threads.create()
    assert "ttl" not in await client.threads.get(no_ttl["thread_id"], include=["ttl"])


async def test_bad_ttl_and_include_are_422(client: LangGraphClient) -> None:
    status, _ = await status_error(client.threads.create(ttl=-1))
    assert status == 422
    status, _ = await status_error(client.threads.create(ttl={"ttl": 5, "strategy": "archive"}))
    assert status == 422
    created = await client.threads.create()
    status, detail = await status_error(client.threads.get(created["thread_id"], include=["x"]))
    assert status == 422
    assert "ttl" in detail


async def test_expired_thread_is_deleted(ttl_client: LangGraphClient) -> None:
    thread = await ttl_client.threads.create(ttl=0.01)
    thread_id = thread["thread_id"]
    await ttl_client.runs.wait(thread_id, "pipeline", input={"text": "a"})
    await until(lambda: gone(ttl_client, thread_id), "the expired thread to be deleted")


async def test_default_ttl_applies_to_new_threads(ttl_client: LangGraphClient) -> None:
    created = await ttl_client.threads.create(metadata=new_tag())
    ttl = ttl_of(await ttl_client.threads.get(created["thread_id"], include=["ttl"]))
    assert ttl["ttl_minutes"] == DEFAULT_TTL
    assert ttl["strategy"] == "delete"
    # A thread a run creates gets it too.
    by_run = "6f6b1c2e-5e0a-4c55-9a43-1c1a8d2f0b11"
    await ttl_client.runs.wait(by_run, "pipeline", input={"text": "a"}, if_not_exists="create")
    assert ttl_of(await ttl_client.threads.get(by_run, include=["ttl"]))["ttl_minutes"] == (
        DEFAULT_TTL
    )
    await until(lambda: gone(ttl_client, created["thread_id"]), "the default TTL to expire")
    await until(lambda: gone(ttl_client, by_run), "the run's thread to expire")


async def test_keep_latest_keeps_the_thread_and_its_last_state(
    ttl_client: LangGraphClient,
) -> None:
    thread = await ttl_client.threads.create(ttl=LONG_TTL)
    thread_id = thread["thread_id"]
    await ttl_client.runs.wait(thread_id, "pipeline", input={"text": "a b"})
    before = await ttl_client.threads.get_history(thread_id, limit=100)
    assert len(before) > 1
    await ttl_client.threads.update(
        thread_id, metadata={}, ttl={"ttl": 0.01, "strategy": "keep_latest"}
    )
    updated = ttl_of(await ttl_client.threads.get(thread_id, include=["ttl"]))
    assert updated["strategy"] == "keep_latest"

    async def pruned() -> bool:
        return len(await ttl_client.threads.get_history(thread_id, limit=100)) == 1

    await until(pruned, "the old checkpoints to be pruned")
    current = await ttl_client.threads.get_state(thread_id)
    assert current["values"]["word_count"] == 2
    assert current["checkpoint"]["checkpoint_id"] == before[0]["checkpoint"]["checkpoint_id"]
    assert not await gone(ttl_client, thread_id)
    # The thread keeps working: a new run builds on the kept state.
    again = await ttl_client.runs.wait(thread_id, "pipeline", input={"text": "a"})
    assert isinstance(again, dict)
    assert len(again["steps"]) == 6


async def test_a_busy_thread_is_swept_once_its_run_ends(ttl_client: LangGraphClient) -> None:
    thread = await ttl_client.threads.create(ttl=0.01)
    thread_id = thread["thread_id"]
    run = await ttl_client.runs.create(thread_id, "slow", input=state(seconds=2.5))
    await wait_for_status(ttl_client, thread_id, run["run_id"], {"running"})
    expires = datetime.fromisoformat(
        ttl_of(await ttl_client.threads.get(thread_id, include=["ttl"]))["expires_at"]
    )
    # Past its expiry (and a sweep) while the run still executes: the thread stays.
    await asyncio.sleep(max((expires - datetime.now(expires.tzinfo)).total_seconds(), 0) + 1.5)
    assert (await ttl_client.runs.get(thread_id, run["run_id"]))["status"] == "running"
    assert not await gone(ttl_client, thread_id)
    await until(lambda: gone(ttl_client, thread_id), "the thread to go after its run")


async def test_prune_deletes_or_keeps_the_latest(client: LangGraphClient) -> None:
    doomed = (await client.threads.create())["thread_id"]
    kept = (await client.threads.create())["thread_id"]
    await client.runs.wait(kept, "pipeline", input={"text": "a"})
    missing = "7b0b6a52-7f0e-4d1c-8d57-7d43b0f0a001"
    assert await client.threads.prune([doomed, missing]) == {"pruned_count": 1}
    assert await gone(client, doomed)
    assert len(await client.threads.get_history(kept, limit=100)) > 1
    assert await client.threads.prune([kept], strategy="keep_latest") == {"pruned_count": 1}
    assert len(await client.threads.get_history(kept, limit=100)) == 1
    assert (await client.threads.get_state(kept))["values"]["steps"][-1] == "report"
    assert await client.threads.prune([]) == {"pruned_count": 0}


async def test_prune_refuses_bad_input(client: LangGraphClient) -> None:
    status, _ = await status_error(
        client.threads.prune(["not-a-uuid"])  # type: ignore[list-item]
    )
    assert status == 422
    created = await client.threads.create()
    status, _ = await status_error(
        client.threads.prune([created["thread_id"]], strategy="archive")  # type: ignore[arg-type]
    )
    assert status == 422
