"""Every view of a run opened as the run ends ends with it, never at a timer.

A view reads its run, then listens for the run's events or its end. Here the run's final
write is held (the run reads as running), the view takes its read, the run ends (its last
events stored, its completion signalled), and only then does the view start listening:
the window a join that opens as its run finishes falls into. Each view must end at once,
with what the protocol sends there. A probe on the view's broker records every fallback
timer that fires after the run's end (a subscription asking whether its run ended after
hearing nothing for a while, a wait for the completion signal that timed out): any is a
failure. On SQLite (`runyard dev`: one runtime, the in-memory broker) and on PostgreSQL
with Redis (two runtimes: the views on one, the run executing on the other).
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import pytest

from runyard.domain.run import RunRecord
from runyard.domain.status import RunStatus
from runyard.schemas.runs import RunCreate
from runyard.services.run_waits import LIVE_ONLY
from runyard.services.session_commands import run_body
from runyard.services.thread_streams import parse_thread_stream_modes
from runyard.streaming.broker import CompletionWaiter, StreamEvent
from runyard.wiring.runtime import Runtime
from tests.support.alarms import ended_before
from tests.support.instances import Held, Instances, deployment, held_end

pytestmark = pytest.mark.timeout(90)

T = TypeVar("T")
SLOW_INPUT = {"seconds": 0.01}
# Two quick steps of the `slow` graph.
STEPS = ["first", "second"]


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
async def instances(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Instances]:
    """`runyard dev` (one runtime), or two instances on one PostgreSQL database and Redis."""
    workdir = tmp_path_factory.mktemp(f"join-at-end-{request.param}")
    async with deployment(request.param, workdir, "runyard_join_at_end") as made:
        yield made


class TimerProbe:
    """Watches a run's subscriptions and completion waits on a runtime's broker (every
    run's while `run_id` is None): `fired` lists the fallback timers that fired once the
    run's end was signalled (`ended`)."""

    def __init__(self, rt: Runtime, run_id: str | None, monkeypatch: pytest.MonkeyPatch) -> None:
        self.run_id = run_id
        self.fired: list[str] = []
        self.any_fired = asyncio.Event()
        self.ended = False
        self.waiting = asyncio.Event()
        subscribe, done_waiter = rt.broker.subscribe, rt.broker.done_waiter
        probe = self

        def probed_subscribe(
            key: str, after: str | None = None, follow: bool = True, ended: Any = None
        ) -> AsyncIterator[StreamEvent]:
            if probe.watches(key) and ended is not None:
                ended = probe.asking(ended)
            return subscribe(key, after, follow, ended)

        @asynccontextmanager
        async def probed_waiter(key: str) -> AsyncIterator[CompletionWaiter]:
            async with done_waiter(key) as waiter:
                yield _ProbedWaiter(waiter, probe) if probe.watches(key) else waiter

        monkeypatch.setattr(rt.broker, "subscribe", probed_subscribe)
        monkeypatch.setattr(rt.broker, "done_waiter", probed_waiter)

    def watches(self, key: str) -> bool:
        """Whether the probe watches the log or the waiters of `key`."""
        return self.run_id is None or key == self.run_id

    def asking(self, ended: Callable[[], Awaitable[bool]]) -> Callable[[], Awaitable[bool]]:
        """`ended`, recorded when asked (the subscription heard nothing for a while)."""

        async def asked() -> bool:
            self.timer("a subscription asked whether the run ended")
            return await ended()

        return asked

    def timer(self, what: str) -> None:
        """A fallback timer fired: a failure once the run's end was signalled."""
        if self.ended:
            self.fired.append(what)
            self.any_fired.set()


class _ProbedWaiter:
    def __init__(self, inner: CompletionWaiter, probe: TimerProbe) -> None:
        self._inner = inner
        self._probe = probe

    async def wait(self, timeout: float | None) -> bool:
        self._probe.waiting.set()
        signalled = await self._inner.wait(timeout)
        if not signalled:
            self._probe.timer(f"a wait for the completion signal timed out ({timeout} s)")
        return signalled


async def _held_run(
    rt: Instances, monkeypatch: pytest.MonkeyPatch, session: bool = False
) -> tuple[str, str, Held, TimerProbe]:
    """A new thread's run whose graph has finished and whose final write is held, with a
    probe on the views' broker."""
    held = held_end(monkeypatch, rt.worker, RunStatus.SUCCESS)
    thread_id = str(uuid.uuid4())
    if session:
        body = run_body({"assistant_id": "slow", "input": SLOW_INPUT})
        run = await rt.api.services.commands.start_run(thread_id, body, {}, None)
    else:
        body = RunCreate(assistant_id="slow", input=SLOW_INPUT, if_not_exists="create")
        run = await rt.api.services.runs.create_run(thread_id, body)
    await asyncio.wait_for(held.reached.wait(), 30)
    return thread_id, run.run_id, held, TimerProbe(rt.api, run.run_id, monkeypatch)


async def _running(rt: Instances, thread_id: str, run_id: str) -> RunRecord:
    """The run as a view reads it first: still running."""
    run = await rt.api.services.runs.get_run(thread_id, run_id)
    assert run.status == RunStatus.RUNNING
    return run


async def _end(rt: Instances, run_id: str, held: Held, probe: TimerProbe) -> None:
    """Let the run end; back once the views' instance has its completion signal (sent with
    its last events: they are stored)."""
    async with rt.api.broker.done_waiter(run_id) as signalled:
        held.release()
        assert await signalled.wait(timeout=30)
    probe.ended = True


async def _at_once(probe: TimerProbe, view: Awaitable[T]) -> T:
    """What the view gives, once it ends; a failure if a fallback timer fired first."""

    def why() -> str:
        return f"the view waited for a timer after the run ended: {probe.fired}"

    return await ended_before(view, probe.any_fired, why, timeout=60)


async def _all(events: AsyncIterator[StreamEvent]) -> list[StreamEvent]:
    return [event async for event in events]


async def _stored(rt: Instances, run_id: str) -> list[StreamEvent]:
    return await _all(rt.api.broker.subscribe(run_id, follow=False))


async def test_a_run_join_opened_as_its_run_ends_ends_at_once_with_nothing(
    instances: Instances, monkeypatch: pytest.MonkeyPatch
) -> None:
    """GET /threads/{id}/runs/{run_id}/stream without Last-Event-ID: live events only, and
    none come after the end (what `client.runs.join_stream` hung on for 10 s)."""
    rt = instances
    thread_id, run_id, held, probe = await _held_run(rt, monkeypatch)
    run = await _running(rt, thread_id, run_id)
    await _end(rt, run_id, held, probe)
    events = rt.api.services.waits.run_events(run, LIVE_ONLY, None, cancel_on_disconnect=False)
    assert await _at_once(probe, _all(events)) == []


async def test_a_run_join_resumed_as_its_run_ends_gets_the_rest_at_once(
    instances: Instances, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same join with Last-Event-ID: exactly the events after it, `end` last."""
    rt = instances
    thread_id, run_id, held, probe = await _held_run(rt, monkeypatch)
    seen = (await _stored(rt, run_id))[0]
    run = await _running(rt, thread_id, run_id)
    await _end(rt, run_id, held, probe)
    events = rt.api.services.waits.run_events(run, seen.id, None, cancel_on_disconnect=False)
    rest = await _at_once(probe, _all(events))
    whole = await _stored(rt, run_id)
    assert [(e.id, e.event) for e in rest] == [(e.id, e.event) for e in whole[1:]]
    assert rest[-1].event == "end"


async def _first_batch(events: AsyncIterator[list[StreamEvent]]) -> list[StreamEvent]:
    return await anext(events)


async def test_a_thread_join_opened_as_its_run_ends_marks_the_run_done_at_once(
    instances: Instances, monkeypatch: pytest.MonkeyPatch
) -> None:
    """GET /threads/{id}/stream: the run it joined live is done, at once."""
    rt = instances
    thread_id, run_id, held, probe = await _held_run(rt, monkeypatch)
    modes = parse_thread_stream_modes(None)
    streams = rt.api.services.thread_streams
    # Opening reads where the thread is (its run, running); the events follow.
    events = await streams.open_thread_events(thread_id, None, modes)
    try:
        await _end(rt, run_id, held, probe)
        batch = await _at_once(probe, _first_batch(events))
    finally:
        await events.aclose()
    assert [(e.event, json.loads(e.data)) for e in batch] == [
        ("metadata", {"status": "run_done", "run_id": run_id})
    ]


async def test_a_thread_join_resumed_as_its_run_ends_gets_the_rest_at_once(
    instances: Instances, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The thread join with Last-Event-ID: the run's events after it, then run_done."""
    rt = instances
    thread_id, run_id, held, probe = await _held_run(rt, monkeypatch)
    stored = await _stored(rt, run_id)
    modes = parse_thread_stream_modes(None)
    resume = f"{run_id}:{stored[0].id}~-"
    events = await rt.api.services.thread_streams.open_thread_events(thread_id, resume, modes)
    try:
        await _end(rt, run_id, held, probe)
        got: list[StreamEvent] = []
        while not got or got[-1].event != "metadata" or "run_done" not in got[-1].data:
            got += await _at_once(probe, _first_batch(events))
    finally:
        await events.aclose()
    # `end` belongs to the run's own stream; the thread's says run_done instead.
    wanted = [e.event for e in stored[1:]]
    assert [e.event for e in got] == [*wanted, "metadata"]
    assert got[-1].id == f"{run_id}:done~-"


async def _until_completed(events: AsyncIterator[dict[str, Any]]) -> list[dict[str, Any]]:
    got = []
    async for event in events:
        got.append(event)
        params = event["params"]
        if event["method"] == "lifecycle" and not params["namespace"]:
            if params["data"]["event"] == "completed":
                return got
    return got


async def test_the_session_events_opened_as_the_run_ends_complete_it_at_once(
    instances: Instances, monkeypatch: pytest.MonkeyPatch
) -> None:
    """POST /threads/{id}/stream/events: the run's events and its completed lifecycle."""
    rt = instances
    thread_id, run_id, held, probe = await _held_run(rt, monkeypatch, session=True)
    session = rt.api.services.session
    first = await session.first_runs(thread_id, 0.0)
    assert [run.status for run in first] == [RunStatus.RUNNING]
    await _end(rt, run_id, held, probe)
    events = session.thread_events(thread_id, None, first)
    try:
        got = await _at_once(probe, _until_completed(events))
    finally:
        await events.aclose()
    lifecycle = [e["params"]["data"]["event"] for e in got if e["method"] == "lifecycle"]
    assert lifecycle[0] == "running" and lifecycle[-1] == "completed"
    assert [e["seq"] for e in got] == list(range(1, len(got) + 1))
    values = [e["params"]["data"] for e in got if e["method"] == "values"]
    assert values[-1]["steps"] == STEPS


async def _body(chunks: AsyncIterator[bytes]) -> Any:
    return json.loads(b"".join([chunk async for chunk in chunks]))


async def test_a_join_waiting_as_its_run_ends_answers_at_once(
    instances: Instances, monkeypatch: pytest.MonkeyPatch
) -> None:
    """GET /threads/{id}/runs/{run_id}/join as the route calls it: it read the run running,
    and waits for its completion signal."""
    rt = instances
    thread_id, run_id, held, probe = await _held_run(rt, monkeypatch)
    waits = rt.api.services.waits
    grace = waits.keepalive_seconds
    joining = asyncio.create_task(waits.open_join(thread_id, run_id, grace))
    await asyncio.wait_for(probe.waiting.wait(), 30)
    await _end(rt, run_id, held, probe)
    run, streamed = await _at_once(probe, joining)
    assert streamed is None and run.status == RunStatus.SUCCESS
    assert (await waits.result_body(run))["steps"] == STEPS


async def test_a_join_body_read_as_its_run_ends_answers_at_once(
    instances: Instances, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The /join that answered with a streamed body (the run had not ended): read after the
    end, the body ends with the result at once."""
    rt = instances
    thread_id, run_id, held, probe = await _held_run(rt, monkeypatch)
    run, streamed = await rt.api.services.waits.open_join(thread_id, run_id)
    assert run.status == RunStatus.RUNNING and streamed is not None
    await _end(rt, run_id, held, probe)
    assert (await _at_once(probe, _body(streamed)))["steps"] == STEPS


async def test_a_wait_whose_run_ends_answers_at_once(
    instances: Instances, monkeypatch: pytest.MonkeyPatch
) -> None:
    """POST /threads/{id}/runs/wait: registered as the run was created, its answer comes
    with the run's end."""
    rt = instances
    held = held_end(monkeypatch, rt.worker, RunStatus.SUCCESS)
    # Before the run exists: /wait registers for its end as it is created.
    probe = TimerProbe(rt.api, None, monkeypatch)
    waits = rt.api.services.waits
    watch = waits.completion_watch()
    body = RunCreate(assistant_id="slow", input=SLOW_INPUT, if_not_exists="create")
    run = await rt.api.services.runs.create_run(
        str(uuid.uuid4()), body, stream_modes=["values"], on_created=watch.register
    )
    probe.run_id = run.run_id
    answer = asyncio.create_task(_body(waits.wait_body(run, False, watch)))
    await asyncio.wait_for(held.reached.wait(), 30)
    await _end(rt, run.run_id, held, probe)
    assert (await _at_once(probe, answer))["steps"] == STEPS
