"""Rejoining a run's stream with Last-Event-ID: exactly the missed events, in order, once."""

from __future__ import annotations

import uuid

import httpx
import pytest
from langgraph_sdk.client import LangGraphClient

from tests.support.runs import (
    SseEvent,
    collect,
    id_key,
    names,
    new_thread,
    parse_sse,
    read_events_until,
    run_id_from,
)


async def full_replay(http: httpx.AsyncClient, stream_path: str) -> list[SseEvent]:
    """Every stored event of a finished run."""
    response = await http.get(stream_path, headers={"Last-Event-ID": "0"})
    assert response.status_code == 200
    return parse_sse(response.content)


def same(events: list[SseEvent]) -> list[tuple[str | None, str, object]]:
    """What identifies an event for comparison."""
    return [(e.id, e.event, e.data) for e in events]


async def test_resume_a_live_stream_after_a_disconnect(base_url: str) -> None:
    path = f"/threads/{uuid.uuid4()}"
    body = {
        "assistant_id": "slow",
        "input": {"seconds": 0.4},
        "stream_mode": ["values", "updates"],
        "stream_resumable": True,
        "if_not_exists": "create",
    }
    async with httpx.AsyncClient(base_url=base_url, timeout=30) as http:
        async with http.stream("POST", f"{path}/runs/stream", json=body) as response:
            stream_path = response.headers["location"]
            seen, _raw = await read_events_until(response, 2)
        assert [e.event for e in seen] == ["metadata", "values"]
        last_id = seen[-1].id
        assert last_id
        # Reconnect while the run still executes: missed events, then the live ones.
        resumed = await http.get(stream_path, headers={"Last-Event-ID": last_id})
        assert resumed.status_code == 200
        rest = parse_sse(resumed.content)
        full = await full_replay(http, stream_path)

    assert same(seen + rest) == same(full)
    ids = [id_key(e.id) for e in seen + rest if e.id]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    assert names(full) == ["metadata", "values", *(["updates", "values"] * 2)]
    assert full[-1].event in ("values", "end")


async def test_resume_a_finished_run_from_each_event(base_url: str) -> None:
    path = f"/threads/{uuid.uuid4()}"
    async with httpx.AsyncClient(base_url=base_url, timeout=30) as http:
        response = await http.post(
            f"{path}/runs/stream",
            json={
                "assistant_id": "pipeline",
                "input": {"text": "a b"},
                "stream_mode": ["updates", "custom"],
                "stream_resumable": True,
                "if_not_exists": "create",
            },
        )
        original = parse_sse(response.content)
        stream_path = response.headers["location"]
        full = await full_replay(http, stream_path)
        assert same(full) == same(original)
        for index, event in enumerate(full):
            assert event.id
            resumed = await http.get(stream_path, headers={"Last-Event-ID": event.id})
            assert resumed.status_code == 200
            assert same(parse_sse(resumed.content)) == same(full[index + 1 :]), event.id


async def test_finished_run_without_last_event_id_sends_nothing(base_url: str) -> None:
    path = f"/threads/{uuid.uuid4()}"
    async with httpx.AsyncClient(base_url=base_url, timeout=30) as http:
        response = await http.post(
            f"{path}/runs/wait",
            json={"assistant_id": "pipeline", "input": {"text": "a"}, "if_not_exists": "create"},
        )
        run_id = run_id_from(response.headers["content-location"])
        joined = await http.get(f"{path}/runs/{run_id}/stream")
        assert joined.status_code == 200
        assert joined.headers["content-type"].startswith("text/event-stream")
        assert parse_sse(joined.content) == []


async def test_replay_filtered_by_stream_mode(base_url: str) -> None:
    path = f"/threads/{uuid.uuid4()}"
    async with httpx.AsyncClient(base_url=base_url, timeout=30) as http:
        response = await http.post(
            f"{path}/runs/stream",
            json={
                "assistant_id": "pipeline",
                "input": {"text": "a b"},
                "stream_mode": ["values", "updates", "custom"],
                "stream_resumable": True,
                "if_not_exists": "create",
            },
        )
        stream_path = response.headers["location"]
        original = parse_sse(response.content)
        filtered = await http.get(
            stream_path, params={"stream_mode": "custom"}, headers={"Last-Event-ID": "0"}
        )
        events = parse_sse(filtered.content)
        assert names(events) == ["custom"] * 3
        customs = [e for e in original if e.event == "custom"]
        assert same([e for e in events if e.event == "custom"]) == same(customs)


@pytest.mark.parametrize(
    "params",
    [
        "stream_mode=updates&stream_mode=custom",
        'stream_mode=["updates","custom"]',
    ],
    ids=["repeated", "json-array"],
)
async def test_replay_filtered_by_several_stream_modes(base_url: str, params: str) -> None:
    """Both query forms LangGraph accepts for several modes: repeated, or a JSON array."""
    path = f"/threads/{uuid.uuid4()}"
    async with httpx.AsyncClient(base_url=base_url, timeout=30) as http:
        response = await http.post(
            f"{path}/runs/stream",
            json={
                "assistant_id": "pipeline",
                "input": {"text": "a b"},
                "stream_mode": ["values", "updates", "custom"],
                "stream_resumable": True,
                "if_not_exists": "create",
            },
        )
        stream_path = response.headers["location"]
        filtered = await http.get(stream_path, params=params, headers={"Last-Event-ID": "0"})
    assert names(parse_sse(filtered.content)) == ["custom", "updates"] * 3


async def test_sdk_join_stream_with_last_event_id(client: LangGraphClient) -> None:
    thread_id = await new_thread(client)
    parts = await collect(
        client.runs.stream(
            thread_id,
            "pipeline",
            input={"text": "a b"},
            stream_mode="updates",
            stream_resumable=True,
            if_not_exists="create",
        )
    )
    run_id = parts[0].data["run_id"]
    assert parts[1].id
    resumed = await collect(client.runs.join_stream(thread_id, run_id, last_event_id=parts[1].id))
    assert [(p.event, p.data) for p in resumed] == [(p.event, p.data) for p in parts[2:]]


async def test_last_event_id_of_an_unknown_run(base_url: str) -> None:
    path = f"/threads/{uuid.uuid4()}"
    async with httpx.AsyncClient(base_url=base_url, timeout=30) as http:
        await http.post(
            f"{path}/runs/wait",
            json={"assistant_id": "pipeline", "input": {"text": "a"}, "if_not_exists": "create"},
        )
        response = await http.get(
            f"{path}/runs/{uuid.uuid4()}/stream", headers={"Last-Event-ID": "0"}
        )
    # LangGraph answers 200 with an error event; a plain 404 is as clear.
    if response.status_code == 200:
        assert names(parse_sse(response.content)) == ["error"]
    else:
        assert response.status_code == 404
