"""GET /threads/{id}/stream (client.threads.join_stream): every run of the thread in turn,
runs created after the client joined included, run_done markers, the lifecycle and
state_update modes, and Last-Event-ID."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx
from langgraph_sdk.client import LangGraphClient
from langgraph_sdk.schema import StreamPart

from tests.support.runs import new_thread, state, status_error, wait_for_status

FULL = ["tokenize", "analyze", "report"]
STREAM_TIMEOUT = 30.0


def is_done(part: StreamPart) -> bool:
    """True for the marker the thread stream sends after each run."""
    return part.event == "metadata" and (part.data or {}).get("status") == "run_done"


async def until_runs_done(parts: AsyncIterator[StreamPart], runs: int) -> list[StreamPart]:
    """The parts of a thread stream up to its `runs`-th run_done marker."""

    async def read() -> list[StreamPart]:
        seen: list[StreamPart] = []
        async for part in parts:
            seen.append(part)
            if sum(1 for p in seen if is_done(p)) == runs:
                return seen
        return seen

    return await asyncio.wait_for(read(), STREAM_TIMEOUT)


def per_run(parts: list[StreamPart]) -> list[list[StreamPart]]:
    """The parts split at each run_done marker (marker included)."""
    groups: list[list[StreamPart]] = [[]]
    for part in parts:
        groups[-1].append(part)
        if is_done(part):
            groups.append([])
    return [group for group in groups if group]


async def test_stream_from_the_beginning_follows_runs_created_later(
    client: LangGraphClient,
) -> None:
    """Joined on a thread with no run yet: both runs created afterwards arrive, in order."""
    thread_id = await new_thread(client)
    stream = await client.threads.join_stream(thread_id, last_event_id="-")
    reader = asyncio.create_task(until_runs_done(stream, 2))
    first = await client.runs.create(thread_id, "pipeline", input={"text": "a"})
    await client.runs.join(thread_id, first["run_id"])
    second = await client.runs.create(thread_id, "pipeline", input={"text": "a b"})
    parts = await reader
    runs = per_run(parts)
    assert len(runs) == 2
    for group, run, words, steps in ((runs[0], first, 1, FULL), (runs[1], second, 2, FULL * 2)):
        assert group[0].event == "metadata"
        assert group[0].data["run_id"] == run["run_id"]
        assert group[-1].data == {"status": "run_done", "run_id": run["run_id"]}
        values = [p.data for p in group if p.event == "values"]
        assert values[-1]["steps"] == steps
        assert values[-1]["word_count"] == words
        assert all(p.event != "end" for p in group)


async def test_live_join_streams_the_running_run_then_the_next(client: LangGraphClient) -> None:
    thread_id = await new_thread(client)
    slow = await client.runs.create(thread_id, "slow", input=state(seconds=1.0))
    await wait_for_status(client, thread_id, slow["run_id"], {"running"})
    reader = asyncio.create_task(until_runs_done(await client.threads.join_stream(thread_id), 2))
    queued = await client.runs.create(
        thread_id, "slow", input=state(seconds=0.1), multitask_strategy="enqueue"
    )
    runs = per_run(await reader)
    assert [group[-1].data["run_id"] for group in runs] == [slow["run_id"], queued["run_id"]]
    # The queued run is streamed whole: it started after the join.
    assert runs[1][0].data == {"run_id": queued["run_id"], "attempt": 1}
    assert [p.data for p in runs[1] if p.event == "values"][-1]["steps"] == ["first", "second"] * 2


async def test_lifecycle_mode_sends_only_run_start_and_end(client: LangGraphClient) -> None:
    thread_id = await new_thread(client)
    stream = await client.threads.join_stream(thread_id, last_event_id="-", stream_mode="lifecycle")
    reader = asyncio.create_task(until_runs_done(stream, 1))
    run = await client.runs.create(thread_id, "pipeline", input={"text": "a"})
    parts = await reader
    assert [(p.event, p.data) for p in parts] == [
        ("metadata", {"run_id": run["run_id"], "attempt": 1}),
        ("metadata", {"status": "run_done", "run_id": run["run_id"]}),
    ]


async def test_state_update_mode_sends_state_updates(client: LangGraphClient) -> None:
    thread_id = await new_thread(client)
    await client.runs.wait(thread_id, "pipeline", input={"text": "a"})
    await client.threads.update_state(thread_id, {"summary": "edited"}, as_node="report")
    stream = await client.threads.join_stream(
        thread_id, last_event_id="-", stream_mode="state_update"
    )

    async def first_update() -> StreamPart:
        async for part in stream:
            return part
        raise AssertionError("the stream ended")

    part = await asyncio.wait_for(first_update(), STREAM_TIMEOUT)
    assert part.event == "state_update"
    assert part.data["thread_id"] == thread_id
    assert part.data["state"]["values"]["summary"] == "edited"
    assert part.data["state"]["values"]["steps"] == FULL


async def test_last_event_id_resumes_exactly(client: LangGraphClient) -> None:
    thread_id = await new_thread(client)
    stream = await client.threads.join_stream(thread_id, last_event_id="-")
    reader = asyncio.create_task(until_runs_done(stream, 2))
    for text in ("a", "a b"):
        run = await client.runs.create(thread_id, "pipeline", input={"text": text})
        await client.runs.join(thread_id, run["run_id"])
    everything = await reader
    assert len(everything) > 4
    # Inside the first run, and at its run_done marker.
    for cut in (2, len(per_run(everything)[0])):
        last_id = everything[cut - 1].id
        assert last_id
        rest = everything[cut:]
        resumed = await until_runs_done(
            await client.threads.join_stream(thread_id, last_event_id=last_id),
            sum(1 for part in rest if is_done(part)),
        )
        assert [(p.id, p.event, p.data) for p in resumed] == [(p.id, p.event, p.data) for p in rest]


async def test_bad_requests_are_refused(client: LangGraphClient, base_url: str) -> None:
    thread_id = await new_thread(client)
    async with httpx.AsyncClient(base_url=base_url, timeout=30) as http:
        bad_mode = await http.get(f"/threads/{thread_id}/stream", params={"stream_mode": "valuez"})
        assert bad_mode.status_code == 422
        assert "run_modes" in bad_mode.text
        missing = await http.get("/threads/00000000-0000-4000-8000-000000000000/stream")
        assert missing.status_code == 404


async def test_stream_ends_when_the_thread_is_deleted(client: LangGraphClient) -> None:
    thread_id = await new_thread(client)
    stream = await client.threads.join_stream(thread_id, last_event_id="-")
    reader = asyncio.create_task(until_runs_done(stream, 1))
    await client.runs.wait(thread_id, "pipeline", input={"text": "a"})
    assert is_done((await reader)[-1])
    await client.threads.delete(thread_id)

    async def rest() -> list[Any]:
        return [part async for part in stream]

    assert await asyncio.wait_for(rest(), STREAM_TIMEOUT) == []


async def test_unknown_thread_is_404_through_the_sdk(client: LangGraphClient) -> None:
    status, _ = await status_error(
        until_runs_done(await client.threads.join_stream("00000000-0000-4000-8000-000000000000"), 1)
    )
    assert status == 404
