"""The thread stream takes run stream modes (`values`, `messages-tuple`, `custom`...) beside its
own (`run_modes`, `lifecycle`, `state_update`) and sends only the run events they name.

Compared with `langgraph dev` (langgraph-api 0.16.7) side by side: `join_stream(thread_id,
stream_mode=[...])` sends `stream_mode`, which that server does not read at all: any value is
accepted (run modes, thread modes and unknown words alike) and every run event is sent. Its
own `stream_modes` parameter takes only the thread modes (422 otherwise) and filters by them.
Runyard reads both parameters: the thread modes filter as there, run modes keep only their
events (each run's start and run_done markers stay, so runs can be told apart), and a word
that is no mode at all is a 422 naming the modes there are.
"""

from __future__ import annotations

import asyncio

import httpx
import pytest
from langgraph_sdk.client import LangGraphClient
from langgraph_sdk.schema import StreamPart

from tests.integration.test_thread_stream import is_done, until_runs_done
from tests.support.runs import new_thread

pytestmark = pytest.mark.timeout(60)

RUN_MODES = ["values", "updates", "custom", "messages-tuple"]


async def one_run(
    client: LangGraphClient, thread_id: str, stream_mode: str | list[str]
) -> tuple[str, list[StreamPart]]:
    """The thread stream's parts for one pipeline run (made with every mode), from its start."""
    stream = await client.threads.join_stream(
        thread_id,
        last_event_id="-",
        stream_mode=stream_mode,  # type: ignore[arg-type]
    )
    reader = asyncio.create_task(until_runs_done(stream, 1))
    run = await client.runs.create(
        thread_id, "pipeline", input={"text": "a b"}, stream_mode=RUN_MODES
    )
    return run["run_id"], await reader


async def test_run_modes_on_the_thread_stream_keep_only_their_events(
    client: LangGraphClient,
) -> None:
    thread_id = await new_thread(client)
    run_id, parts = await one_run(client, thread_id, ["values", "messages-tuple", "custom"])
    events = [part.event for part in parts]
    assert events[0] == "metadata" and parts[0].data["run_id"] == run_id
    assert is_done(parts[-1]) and parts[-1].data["run_id"] == run_id
    assert set(events[1:-1]) == {"values", "custom"}  # the pipeline sends no messages
    assert [p.data["step"] for p in parts if p.event == "custom"] == [
        "tokenize",
        "analyze",
        "report",
    ]
    assert [p.data for p in parts if p.event == "values"][-1]["word_count"] == 2


async def test_run_modes_combine_with_the_thread_modes(client: LangGraphClient) -> None:
    thread_id = await new_thread(client)
    _, parts = await one_run(client, thread_id, ["lifecycle", "updates"])
    assert {part.event for part in parts} == {"metadata", "updates"}
    _, everything = await one_run(client, thread_id, ["run_modes", "custom"])
    assert {part.event for part in everything} == {"metadata", "values", "updates", "custom"}


async def test_a_word_that_is_no_mode_is_refused_naming_the_modes(
    client: LangGraphClient, base_url: str
) -> None:
    thread_id = await new_thread(client)
    async with httpx.AsyncClient(base_url=base_url, timeout=30) as http:
        for params in ({"stream_mode": "valuez"}, {"stream_modes": "run_modes,valuez"}):
            answer = await http.get(f"/threads/{thread_id}/stream", params=params)
            assert answer.status_code == 422, answer.text
            assert "valuez" in answer.text
            assert "run_modes" in answer.text and "messages-tuple" in answer.text
