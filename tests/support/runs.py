"""Helpers for the run tests: threads, status polling, stream collection and raw SSE parsing."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from langgraph_sdk.client import LangGraphClient
from langgraph_sdk.schema import StreamPart

TERMINAL = frozenset({"success", "error", "interrupted", "timeout"})
RUN_KEYS = {
    "run_id",
    "thread_id",
    "assistant_id",
    "created_at",
    "updated_at",
    "status",
    "metadata",
    "kwargs",
    "multitask_strategy",
}
CHAT_REPLY = "Hello! I am the Runyard example agent. Ask me anything."


def state(**values: Any) -> dict[str, Any]:
    """A graph input, typed loosely (the SDK's JSON types refuse a plain list[str])."""
    return dict(values)


def kwargs_of(run: Any) -> dict[str, Any]:
    """A run's kwargs (the SDK's Run type does not declare them)."""
    return dict(run["kwargs"])


def metadata_of(item: Any) -> dict[str, Any]:
    """The metadata of a run or thread, never None."""
    return dict(item["metadata"] or {})


def values_of(thread: Any) -> dict[str, Any]:
    """A thread's values, never None."""
    return dict(thread["values"] or {})


def new_tag() -> dict[str, str]:
    """Metadata that marks what one test creates, so filters never see other tests' rows."""
    return {"test_tag": uuid.uuid4().hex}


async def new_thread(client: LangGraphClient) -> str:
    """A thread id to run on: a created thread, or a fresh id when the threads API is missing.

    Run calls in the tests pass if_not_exists="create", so a fresh id becomes a thread on
    the first run either way.
    """
    try:
        thread = await client.threads.create(metadata=new_tag())
    except httpx.HTTPStatusError as exc:
        if exc.response.status_code in (404, 405):
            return str(uuid.uuid4())
        raise
    return str(thread["thread_id"])


async def wait_for_status(
    client: LangGraphClient,
    thread_id: str,
    run_id: str,
    statuses: set[str] | frozenset[str],
    timeout: float = 10.0,
) -> dict[str, Any]:
    """Poll the run until its status is one of `statuses`; fail with the last status seen."""
    deadline = time.monotonic() + timeout
    run: dict[str, Any] = {}
    while time.monotonic() < deadline:
        run = dict(await client.runs.get(thread_id, run_id))
        if run["status"] in statuses:
            return run
        await asyncio.sleep(0.05)
    pytest.fail(f"run {run_id} never reached {sorted(statuses)}; last status {run.get('status')}")


async def wait_for_end(
    client: LangGraphClient, thread_id: str, run_id: str, timeout: float = 120
) -> str:
    """The run's terminal status, asked again when a stopping instance drops the request."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            status = str((await client.runs.get(thread_id, run_id))["status"])
        except httpx.HTTPError:
            status = "unknown"
        if status in TERMINAL:
            return status
        await asyncio.sleep(0.2)
    raise AssertionError(f"run {run_id} never finished")


async def wait_for_values(
    client: LangGraphClient,
    thread_id: str,
    ready: Callable[[dict[str, Any]], bool],
    timeout: float = 60,
) -> dict[str, Any]:
    """The thread's values once `ready(values)` is true."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        values = (await client.threads.get_state(thread_id))["values"]
        if isinstance(values, dict) and ready(values):
            return values
        await asyncio.sleep(0.1)
    raise AssertionError(f"thread {thread_id} never reached the expected values")


async def wait_for_gone(http: httpx.AsyncClient, path: str, timeout: float = 10.0) -> None:
    """Poll GET `path` until it answers 404."""
    deadline = time.monotonic() + timeout
    status = None
    while time.monotonic() < deadline:
        status = (await http.get(path)).status_code
        if status == 404:
            return
        await asyncio.sleep(0.05)
    pytest.fail(f"{path} still answers {status}, expected 404")


async def collect(parts: AsyncIterator[StreamPart]) -> list[StreamPart]:
    """Every part of an SDK stream."""
    return [part async for part in parts]


def names(parts: list[StreamPart] | list[SseEvent]) -> list[str]:
    """The event names, without a trailing `end` event (LangGraph Platform sends none)."""
    out = [part.event for part in parts]
    if out and out[-1] == "end":
        out.pop()
    return out


def data_of(parts: list[StreamPart], event: str) -> list[Any]:
    """The data of every part named `event`."""
    return [part.data for part in parts if part.event == event]


async def status_error(call: Awaitable[Any]) -> tuple[int, str]:
    """The status code and detail of an SDK call expected to fail."""
    with pytest.raises(httpx.HTTPStatusError) as caught:
        await call
    response = caught.value.response
    try:
        detail = response.json().get("detail", "")
    except (ValueError, AttributeError, httpx.ResponseNotRead):
        detail = ""
    return response.status_code, str(detail)


@dataclass(frozen=True)
class SseEvent:
    """One raw server-sent event."""

    event: str
    data: Any
    id: str | None
    raw: bytes


def parse_sse(raw: bytes) -> list[SseEvent]:
    """Parse a complete SSE body (CRLF or LF framing); comments are skipped."""
    text = raw.replace(b"\r\n", b"\n")
    events = []
    for block in text.split(b"\n\n"):
        if not block.strip():
            continue
        fields: dict[str, list[bytes]] = {}
        for line in block.split(b"\n"):
            if line.startswith(b":"):
                continue
            name, _, value = line.partition(b":")
            fields.setdefault(name.decode(), []).append(value.removeprefix(b" "))
        if "event" not in fields and "data" not in fields:
            continue
        data = b"\n".join(fields.get("data", []))
        event_id = fields["id"][-1].decode() if "id" in fields else None
        events.append(
            SseEvent(
                event=fields.get("event", [b"message"])[-1].decode(),
                data=json.loads(data) if data else None,
                id=event_id,
                raw=block,
            )
        )
    return events


def id_key(event_id: str) -> tuple[int, ...]:
    """A sortable key for event ids such as `12` or `1795969701407-0`."""
    return tuple(int(part) for part in event_id.split("-"))


def run_id_from(location: str) -> str:
    """The run id at the end of a Content-Location header."""
    parts = location.rstrip("/").split("/")
    return parts[parts.index("runs") + 1]


def thread_id_from(location: str) -> str | None:
    """The thread id in a Content-Location header, if it names one."""
    parts = location.rstrip("/").split("/")
    return parts[parts.index("threads") + 1] if "threads" in parts else None


async def read_events_until(response: httpx.Response, count: int) -> tuple[list[SseEvent], bytes]:
    """Read a live SSE response until `count` events arrived; returns them and the raw bytes."""
    buffer = b""
    async for chunk in response.aiter_bytes():
        buffer += chunk
        complete = buffer.replace(b"\r\n", b"\n").rsplit(b"\n\n", 1)[0]
        events = parse_sse(complete + b"\n\n") if b"\n\n" in buffer.replace(b"\r\n", b"\n") else []
        if len(events) >= count:
            return events[:count], buffer
    return parse_sse(buffer), buffer
