"""Raw SSE and wait bodies over httpx: framing, headers, ids, heartbeats, UTF-8, disconnects."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.support.databases import create_migrated_database, drop_database
from tests.support.runs import (
    id_key,
    names,
    parse_sse,
    run_id_from,
)
from tests.support.server import ServerProcess

UNICODE_TEXT = "héllo wörld 日本語 😀"


@pytest.fixture(scope="module")
def quick_keepalive_server(
    server: ServerProcess, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    """A server of the same backend whose keep-alives come every 0.3 s."""
    env = {"RUNYARD_KEEPALIVE_SECONDS": "0.3"}
    database = None
    if server.mode == "serve":
        database = create_migrated_database()
        env.update(DATABASE_URL=database, REDIS_URL="")
    proc = ServerProcess(server.mode, tmp_path_factory.mktemp("keepalive"), env=env)
    try:
        proc.start()
        yield proc
    finally:
        proc.stop()
        if database:
            drop_database(database)


async def post_stream(base_url: str, path: str, body: dict[str, Any]) -> httpx.Response:
    """POST and read the whole streamed body."""
    async with httpx.AsyncClient(base_url=base_url, timeout=60) as http:
        response = await http.post(path, json=body)
        await response.aread()
        return response


def thread_path() -> str:
    return f"/threads/{uuid.uuid4()}"


async def test_stream_headers_framing_and_ids(base_url: str) -> None:
    path = thread_path()
    response = await post_stream(
        base_url,
        f"{path}/runs/stream",
        {
            "assistant_id": "pipeline",
            "input": {"text": "a bb"},
            "stream_mode": ["values", "updates"],
            "if_not_exists": "create",
        },
    )
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    assert response.headers["cache-control"] == "no-store"
    content_location = response.headers["content-location"]
    run_id = run_id_from(content_location)
    assert content_location == f"{path}/runs/{run_id}"
    assert response.headers["location"] == f"{path}/runs/{run_id}/stream"

    raw = response.content
    # CRLF framing, one data line per event.
    assert b"\r\n\r\n" in raw
    assert b"\n" not in raw.replace(b"\r\n", b"")
    events = parse_sse(raw)
    for event in events:
        assert event.raw.count(b"data:") == 1
        assert event.id, event.raw
    assert events[0].event == "metadata"
    assert events[0].data == {"run_id": run_id, "attempt": 1}
    assert names(events) == [
        "metadata",
        "values",
        *(["updates", "values"] * 3),
    ]
    keys = [id_key(e.id) for e in events if e.id]
    assert keys == sorted(keys)
    assert len(set(keys)) == len(keys)


async def test_stream_error_event(base_url: str) -> None:
    response = await post_stream(
        base_url,
        f"{thread_path()}/runs/stream",
        {"assistant_id": "fail", "input": {"value": 7}, "if_not_exists": "create"},
    )
    assert response.status_code == 200
    events = parse_sse(response.content)
    assert names(events)[-1] == "error"
    error = next(e for e in events if e.event == "error")
    assert error.data == {"error": "ValueError", "message": "boom: cannot process 7"}
    assert b"event: error\r\ndata: " in response.content


async def test_non_ascii_arrives_as_itself(base_url: str) -> None:
    path = thread_path()
    body = {
        "assistant_id": "agent",
        "input": {"messages": [{"role": "user", "content": UNICODE_TEXT}]},
        "stream_mode": ["values", "messages-tuple"],
        "if_not_exists": "create",
    }
    encoded = UNICODE_TEXT.encode()
    response = await post_stream(base_url, f"{path}/runs/stream", body)
    assert encoded in response.content
    assert b"\\u" not in response.content
    assert parse_sse(response.content)[-1].event in ("values", "end")

    body.pop("stream_mode")
    response = await post_stream(base_url, f"{path}/runs/wait", body)
    assert response.status_code == 200
    assert f"You said: {UNICODE_TEXT}".encode() in response.content
    assert b"\\u" not in response.content

    run_id = run_id_from(response.headers["content-location"])
    async with httpx.AsyncClient(base_url=base_url, timeout=30) as http:
        joined = await http.get(f"{path}/runs/{run_id}/join")
        assert encoded in joined.content
        assert b"\\u" not in joined.content
        run = await http.get(f"{path}/runs/{run_id}")
        assert encoded in run.content
        assert b"\\u" not in run.content


async def test_on_disconnect_cancel_interrupts_the_run(base_url: str) -> None:
    path = thread_path()
    async with httpx.AsyncClient(base_url=base_url, timeout=30) as http:
        async with http.stream(
            "POST",
            f"{path}/runs/stream",
            json={
                "assistant_id": "slow",
                "input": {"seconds": 2},
                "on_disconnect": "cancel",
                "if_not_exists": "create",
            },
        ) as response:
            run_id = run_id_from(response.headers["content-location"])
            async for line in response.aiter_lines():
                if line.startswith("event: metadata"):
                    break
        await wait_for_terminal(http, f"{path}/runs/{run_id}", "interrupted")


async def test_on_disconnect_continue_lets_the_run_finish(base_url: str) -> None:
    path = thread_path()
    async with httpx.AsyncClient(base_url=base_url, timeout=30) as http:
        async with http.stream(
            "POST",
            f"{path}/runs/stream",
            json={"assistant_id": "slow", "input": {"seconds": 0.3}, "if_not_exists": "create"},
        ) as response:
            run_id = run_id_from(response.headers["content-location"])
            async for line in response.aiter_lines():
                if line.startswith("event: metadata"):
                    break
        joined = (await http.get(f"{path}/runs/{run_id}/join")).json()
        assert joined["steps"] == ["first", "second"]
        assert (await http.get(f"{path}/runs/{run_id}")).json()["status"] == "success"


async def test_wait_on_disconnect_cancel_interrupts_the_run(base_url: str) -> None:
    path = thread_path()
    async with httpx.AsyncClient(base_url=base_url, timeout=30) as http:
        with pytest.raises(httpx.ReadTimeout):
            await http.post(
                f"{path}/runs/wait",
                json={
                    "assistant_id": "slow",
                    "input": {"seconds": 2},
                    "on_disconnect": "cancel",
                    "if_not_exists": "create",
                },
                timeout=httpx.Timeout(30, read=0.7),
            )
        run = (await http.get(f"{path}/runs")).json()[0]
        await wait_for_terminal(http, f"{path}/runs/{run['run_id']}", "interrupted")


async def wait_for_terminal(http: httpx.AsyncClient, run_path: str, expected: str) -> None:
    """Poll a run until it ends (generous bound) and check how it ended."""
    deadline = time.monotonic() + 10
    status = None
    while time.monotonic() < deadline:
        status = (await http.get(run_path)).json()["status"]
        if status not in ("pending", "running"):
            break
        await asyncio.sleep(0.05)
    assert status == expected


async def test_heartbeat_comment_while_idle(quick_keepalive_server: ServerProcess) -> None:
    response = await post_stream(
        quick_keepalive_server.url,
        f"{thread_path()}/runs/stream",
        {"assistant_id": "slow", "input": {"seconds": 1}, "if_not_exists": "create"},
    )
    raw = response.content
    assert b": heartbeat\r\n\r\n" in raw
    # Heartbeats are comments: the events are unchanged around them.
    assert names(parse_sse(raw)) == ["metadata", "values", "values", "values"]


async def test_wait_writes_newlines_while_the_run_executes(
    quick_keepalive_server: ServerProcess,
) -> None:
    path = thread_path()
    response = await post_stream(
        quick_keepalive_server.url,
        f"{path}/runs/wait",
        {"assistant_id": "slow", "input": {"seconds": 0.8}, "if_not_exists": "create"},
    )
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/json")
    raw = response.content
    assert raw.startswith(b"\n")
    assert json.loads(raw) == {"seconds": 0.8, "steps": ["first", "second"]}
    run_id = run_id_from(response.headers["content-location"])
    assert response.headers["location"] == f"{path}/runs/{run_id}/join"


async def test_join_of_a_running_run_keeps_the_connection_alive(
    quick_keepalive_server: ServerProcess,
) -> None:
    path = thread_path()
    async with httpx.AsyncClient(base_url=quick_keepalive_server.url, timeout=30) as http:
        run = (
            await http.post(
                f"{path}/runs",
                json={"assistant_id": "slow", "input": {"seconds": 0.8}, "if_not_exists": "create"},
            )
        ).json()
        joined = await http.get(f"{path}/runs/{run['run_id']}/join")
        assert joined.status_code == 200
        # Like /wait, a long join sends newlines first so proxies keep the connection open.
        assert joined.content.startswith(b"\n")
        assert json.loads(joined.content)["steps"] == ["first", "second"]


async def test_stateless_stream_headers(base_url: str) -> None:
    response = await post_stream(
        base_url, "/runs/stream", {"assistant_id": "pipeline", "input": {"text": "a"}}
    )
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    run_id = run_id_from(response.headers["content-location"])
    events = parse_sse(response.content)
    assert events[0].data["run_id"] == run_id
    assert names(events) == ["metadata", "values", "values", "values", "values"]
