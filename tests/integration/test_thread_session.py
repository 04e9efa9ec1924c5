"""The thread streaming session (`client.threads.stream()`), over SSE and WebSocket, against
`runyard dev` and against two `runyard serve` instances sharing PostgreSQL and Redis: the
session talks to one (which runs no worker), the runs execute on the other."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_client
from langgraph_sdk.client import LangGraphClient
from websockets.asyncio.client import connect

from runyard.services.thread_session import NEXT_RUN_POLL_SECONDS
from runyard.streaming.session_events import SUPPORTED_CHANNELS
from tests.support.databases import fresh_database
from tests.support.redis_keys import delete_keys
from tests.support.server import TEST_CONFIG, ServerProcess, start_together

pytestmark = pytest.mark.timeout(120)
TIMEOUT = 30.0
# Every channel the session serves.
ALL = sorted(SUPPORTED_CHANNELS)
REDIS_URL = "redis://127.0.0.1:6379/0"
FULL_STEPS = ["tokenize", "analyze", "report"]


class Deployment:
    """Where the session talks (`session_url`) and another instance (`other_url`)."""

    def __init__(self, session_url: str, other_url: str) -> None:
        self.session_url = session_url
        self.other_url = other_url


@pytest.fixture(scope="module", params=["dev", "two-instances"])
def deployment(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Deployment]:
    """One `runyard dev`, or two `runyard serve`: the session's (no worker) and the runs'."""
    workdir = tmp_path_factory.mktemp(f"session-{request.param}")
    if request.param == "dev":
        dev = ServerProcess("dev", workdir, config=TEST_CONFIG).start()
        try:
            yield Deployment(dev.url, dev.url)
        finally:
            dev.stop()
        return
    prefix = f"session-{uuid.uuid4().hex[:8]}:"
    env = {"REDIS_URL": REDIS_URL, "RUNYARD_REDIS_PREFIX": prefix}
    with fresh_database() as url:
        env["DATABASE_URL"] = url
        front = ServerProcess("serve", workdir / "a", env={**env, "WORKER_COUNT": "0"})
        back = ServerProcess("serve", workdir / "b", env=env)
        start_together([front, back])  # both migrate the fresh database: one waits its turn
        try:
            yield Deployment(front.url, back.url)
        finally:
            front.stop()
            back.stop()
            delete_keys(REDIS_URL, prefix)


@pytest.fixture
async def client(deployment: Deployment) -> AsyncIterator[LangGraphClient]:
    """An SDK client of the session's instance."""
    lg = get_client(url=deployment.session_url, api_key=None)
    try:
        yield lg
    finally:
        await lg.http.client.aclose()


@pytest.fixture(params=["sse", "websocket"])
def transport(request: pytest.FixtureRequest) -> str:
    """The SDK's event transport."""
    return str(request.param)


async def until(predicate: Any, what: str) -> None:
    """Wait until `predicate()` is true."""
    for _ in range(int(TIMEOUT / 0.05)):
        if predicate():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


async def collect(events: AsyncIterator[Any], stop: Any) -> list[Any]:
    """Items of `events` up to the first for which `stop(item)` is true."""

    async def read() -> list[Any]:
        seen = []
        async for item in events:
            seen.append(item)
            if stop(item):
                break
        return seen

    return await asyncio.wait_for(read(), TIMEOUT)


def root_end(event: dict[str, Any]) -> bool:
    """The root's completed or failed lifecycle: the end of a run."""
    params = event.get("params") or {}
    return (
        event.get("method") == "lifecycle"
        and not params.get("namespace")
        and params.get("data", {}).get("event") in ("completed", "failed")
    )


async def test_output_and_values(
    client: LangGraphClient, deployment: Deployment, transport: str
) -> None:
    """`thread.output` is the final state, `thread.values` gets to it; the values channel
    carries every snapshot on the way."""
    async with client.threads.stream(assistant_id="pipeline", transport=transport) as thread:
        snapshots: list[Any] = []

        async def values() -> None:
            async for snapshot in thread.values:
                snapshots.append(snapshot)

        reader = asyncio.create_task(values())
        await thread.run.start(input={"text": "a bb ccc"})
        output = await asyncio.wait_for(thread.output, TIMEOUT)
        assert output["summary"] == "3 words, longest word: 'ccc'"
        # The projection starts from the thread's state and follows from the client's cursor:
        # a run that ended before it subscribed shows as its final state only.
        await until(lambda: output in snapshots, "the final values snapshot")
        reader.cancel()
        thread_id = thread.thread_id
    body = {"channels": ["values", "lifecycle", "custom:progress", "custom"]}
    events = await raw_events(deployment.session_url, thread_id, transport, body, root_end)
    steps = [e["params"]["data"].get("steps") for e in events if e["method"] == "values"]
    assert steps == [[], ["tokenize"], ["tokenize", "analyze"], FULL_STEPS]
    progress = [e["params"]["data"]["progress"] for e in events if e["method"] == "custom"]
    assert progress == [33, 66, 100]


async def test_messages_arrive_token_by_token(client: LangGraphClient, transport: str) -> None:
    """The reply streams word by word through `thread.messages`."""
    async with client.threads.stream(assistant_id="agent", transport=transport) as thread:
        tokens: list[str] = []
        texts: list[asyncio.Task[None]] = []

        async def text(message: Any) -> None:
            async for token in message.text:
                tokens.append(token)

        async def messages() -> None:
            async for message in thread.messages:
                texts.append(asyncio.create_task(text(message)))

        reader = asyncio.create_task(messages())
        await thread.run.start(input={"messages": [{"role": "user", "content": "hello"}]})
        await asyncio.wait_for(thread.output, TIMEOUT)
        reply = "Hello! I am the Runyard example agent. Ask me anything."
        await until(lambda: "".join(tokens) == reply, "every token")
        assert len(tokens) == len(reply.split(" "))
        reader.cancel()


async def test_interrupt_then_respond(client: LangGraphClient, transport: str) -> None:
    """A run stopped at `interrupt()` shows as an input request; answering it resumes."""
    async with client.threads.stream(assistant_id="agent", transport=transport) as thread:
        ask = {"messages": [{"role": "user", "content": "please book a table"}]}
        await thread.run.start(input=ask)
        await until(lambda: thread.interrupted, "the interrupt")
        (pending,) = thread.interrupts
        assert pending["namespace"] == []
        reply = await thread.run.respond("yes")
        assert reply == {}
        output = await asyncio.wait_for(thread.output, TIMEOUT)
        assert output["messages"][-1]["content"][0]["text"] == "Done: book a table."
        state = await client.threads.get_state(thread.thread_id)
        assert state["next"] == [] and not state["tasks"]


async def test_subgraph_namespaces_filter(client: LangGraphClient, transport: str) -> None:
    """Subgraph events carry their namespace; `namespaces` and `depth` select them."""
    async with client.threads.stream(assistant_id="subgraph", transport=transport) as thread:
        child = thread.subscribe(["values", "lifecycle"], namespaces=[["child"]], depth=0)
        everything = thread.subscribe(["values", "lifecycle"])
        await thread.run.start(input={"steps": []})
        child_events, all_events = await asyncio.gather(
            collect(
                child,
                lambda e: (
                    e["method"] == "lifecycle" and e["params"]["data"]["event"] == "completed"
                ),
            ),
            collect(everything, root_end),
        )
    assert {len(e["params"]["namespace"]) for e in child_events} == {1}
    assert all(e["params"]["namespace"][0].startswith("child:") for e in child_events)
    depths = {len(e["params"]["namespace"]) for e in all_events}
    assert depths == {0, 1, 2}
    started = [
        e["params"]["namespace"][-1].split(":")[0]
        for e in all_events
        if e["method"] == "lifecycle" and e["params"]["data"]["event"] == "started"
    ]
    assert started == ["child", "inner"]
    seqs = [e["seq"] for e in all_events]
    assert seqs == sorted(seqs) and len(set(e["event_id"] for e in all_events)) == len(seqs)


async def test_second_run_continues_the_thread(client: LangGraphClient, transport: str) -> None:
    """A second `run.start` on the same session continues from the thread's checkpoint."""
    async with client.threads.stream(assistant_id="agent", transport=transport) as thread:
        lifecycle = thread.subscribe(["lifecycle"])
        await thread.run.start(input={"messages": [{"role": "user", "content": "hello"}]})
        first = await collect(lifecycle, root_end)
        # A projection ends with its run: the next run gets a new one.
        again = thread.subscribe(["lifecycle"])
        await thread.run.start(input={"messages": [{"role": "user", "content": "a story"}]})
        second = await collect(again, root_end)
    assert [
        e["params"]["data"]["event"] for e in first + second if not e["params"]["namespace"]
    ] == [
        "running",
        "completed",
        "running",
        "completed",
    ]
    assert second[0]["seq"] > first[-1]["seq"]
    state = await client.threads.get_state(thread.thread_id)
    kinds = [m["type"] for m in state["values"]["messages"]]
    assert kinds == ["human", "ai", "human", "ai"]


async def raw_events(
    url: str, thread_id: str, transport: str, body: dict[str, Any], stop: Any
) -> list[dict[str, Any]]:
    """The thread's session events the stream `body` asks for, over SSE or a WebSocket."""
    if transport == "sse":
        return await collect(_sse_events(url, thread_id, body), stop)
    return await collect(_ws_events(url, thread_id, body), stop)


async def _sse_events(url: str, thread_id: str, body: dict[str, Any]) -> AsyncIterator[Any]:
    async with (
        httpx.AsyncClient(base_url=url, timeout=TIMEOUT) as http,
        http.stream("POST", f"/threads/{thread_id}/stream/events", json=body) as response,
    ):
        assert response.status_code == 200
        event = seq = None
        async for line in response.aiter_lines():
            if line.startswith("event: "):
                event = line[7:]
            elif line.startswith("id: "):
                seq = line[4:]
            elif line.startswith("data: "):
                data = json.loads(line[6:])
                if data.get("type") == "event":
                    assert (event, seq) == (data["method"], str(data["seq"]))
                yield data


async def _ws_events(url: str, thread_id: str, body: dict[str, Any]) -> AsyncIterator[Any]:
    ws_url = url.replace("http://", "ws://") + f"/threads/{thread_id}/stream/events"
    async with connect(ws_url) as socket:
        command = {"id": 1, "method": "subscription.subscribe", "params": body}
        await socket.send(json.dumps(command))
        async for raw in socket:
            data = json.loads(raw)
            if data.get("type") == "success":
                continue
            yield data


async def test_reconnect_with_since_gets_exactly_the_rest(
    client: LangGraphClient, deployment: Deployment, transport: str
) -> None:
    """Resuming with `since` (on the other instance) replays exactly the events after it."""
    async with client.threads.stream(assistant_id="agent", transport=transport) as thread:
        await thread.run.start(input={"messages": [{"role": "user", "content": "a story"}]})
        await asyncio.wait_for(thread.output, TIMEOUT)
        thread_id = thread.thread_id
    full = await raw_events(
        deployment.session_url, thread_id, transport, {"channels": ALL}, root_end
    )
    assert [e["seq"] for e in full] == list(range(1, len(full) + 1))
    cut = len(full) // 2
    body = {"channels": ALL, "since": cut}
    rest = await raw_events(deployment.other_url, thread_id, transport, body, root_end)
    assert rest == full[cut:]


async def test_bad_commands_get_error_replies(
    client: LangGraphClient, deployment: Deployment, transport: str
) -> None:
    """Malformed or refused commands are answered with error replies; nothing is left."""
    thread_id = str(uuid.uuid4())
    replies = await _commands(
        deployment.session_url,
        thread_id,
        transport,
        [
            {"id": 1, "method": "run.begin", "params": {}},
            {"id": 2, "method": "run.start", "params": {}},
            {"id": 3, "method": "run.start", "params": {"assistant_id": "no-such-graph"}},
            {"id": 4, "method": "input.respond", "params": {"interrupt_id": "x"}},
            {"id": 5, "method": "subscription.subscribe", "params": {"channels": ["bogus"]}},
            {"id": 6, "method": "run.start", "params": {"assistant_id": "agent", "config": 3}},
            {"id": 8, "method": "input.respond", "params": {"responses": []}},
            {"id": "seven", "method": "run.start"},
        ],
    )
    codes = [(r["id"], r["error"]) for r in replies]
    assert codes == [
        (1, "unknown_command"),
        (2, "invalid_argument"),
        (3, "invalid_argument"),
        (4, "no_such_run"),
        (5, "invalid_argument"),
        (6, "invalid_argument"),
        (8, "invalid_argument"),
        ("seven", "invalid_argument"),
    ]
    assert all(r["type"] == "error" and r["message"] for r in replies)
    async with httpx.AsyncClient(base_url=deployment.session_url, timeout=TIMEOUT) as http:
        assert (await http.get(f"/threads/{thread_id}")).status_code == 404


async def test_stale_interrupt_id_leaves_the_thread_as_it_was(
    client: LangGraphClient, deployment: Deployment, transport: str
) -> None:
    """A wrong interrupt id, or the right one in another namespace, is refused; the pending
    interrupt still resumes afterwards."""
    async with client.threads.stream(assistant_id="agent", transport=transport) as thread:
        ask = {"messages": [{"role": "user", "content": "please water the plants"}]}
        await thread.run.start(input=ask)
        await until(lambda: thread.interrupted, "the interrupt")
        (pending,) = thread.interrupts
        wrong = [
            {"interrupt_id": "nope", "namespace": [], "response": 1},
            {"interrupt_id": pending["interrupt_id"], "namespace": ["elsewhere"], "response": 1},
        ]
        replies = await _commands(
            deployment.session_url,
            thread.thread_id,
            transport,
            [{"id": n, "method": "input.respond", "params": p} for n, p in enumerate(wrong)],
        )
        assert [r["error"] for r in replies] == ["no_such_interrupt", "no_such_interrupt"]
        state = await client.threads.get(thread.thread_id)
        assert state["status"] == "interrupted"
        await thread.run.respond("no")
        output = await asyncio.wait_for(thread.output, TIMEOUT)
    assert output["messages"][-1]["content"] == "All right, I will not water the plants."


async def _commands(
    url: str, thread_id: str, transport: str, commands: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The replies to the commands, sent over HTTP (SSE) or over the WebSocket."""
    if transport == "sse":
        async with httpx.AsyncClient(base_url=url, timeout=TIMEOUT) as http:
            replies = []
            for command in commands:
                response = await http.post(f"/threads/{thread_id}/commands", json=command)
                assert response.status_code in (200, 400), response.text
                replies.append(response.json())
            return replies
    ws_url = url.replace("http://", "ws://") + f"/threads/{thread_id}/stream/events"
    async with connect(ws_url) as socket:
        replies = []
        for command in commands:
            await socket.send(json.dumps(command))
            replies.append(json.loads(await asyncio.wait_for(socket.recv(), TIMEOUT)))
        return replies


async def test_websocket_subscriptions_come_and_go(deployment: Deployment) -> None:
    """Over a WebSocket, subscriptions are the connection's: unsubscribed once only."""
    thread_id = str(uuid.uuid4())
    ws_url = deployment.session_url.replace("http://", "ws://")
    async with connect(f"{ws_url}/threads/{thread_id}/stream/events") as socket:

        async def ask(command_id: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
            await socket.send(json.dumps({"id": command_id, "method": method, "params": params}))
            reply: dict[str, Any] = json.loads(await asyncio.wait_for(socket.recv(), TIMEOUT))
            assert reply["id"] == command_id
            return reply

        subscribed = await ask(1, "subscription.subscribe", {"channels": ["lifecycle"]})
        subscription_id = subscribed["result"]["subscription_id"]
        assert (await ask(2, "subscription.reconnect", {"since": 0}))["result"]["restored"]
        gone = await ask(3, "subscription.unsubscribe", {"subscription_id": subscription_id})
        assert gone["type"] == "success"
        again = await ask(4, "subscription.unsubscribe", {"subscription_id": subscription_id})
        assert again["error"] == "no_such_subscription"
        bad = await ask(5, "subscription.subscribe", {"channels": ["values"], "depth": -1})
        assert bad["error"] == "invalid_argument"
        await socket.send("not json")
        garbled = json.loads(await asyncio.wait_for(socket.recv(), TIMEOUT))
        assert garbled == {
            "type": "error",
            "id": None,
            "error": "invalid_argument",
            "message": "Protocol commands must be valid JSON.",
        }


async def test_a_long_thread_replays_every_run_in_order(deployment: Deployment) -> None:
    """A thread with more runs than one page of the run list replays all of them, in order."""
    thread_id = str(uuid.uuid4())
    count = 53
    async with httpx.AsyncClient(base_url=deployment.session_url, timeout=TIMEOUT) as http:
        for n in range(count):
            params = {"assistant_id": "pipeline", "input": {"text": "x " * (n + 1)}}
            body = {"id": n, "method": "run.start", "params": params}
            reply = await http.post(f"/threads/{thread_id}/commands", json=body)
            assert reply.json()["type"] == "success", reply.text
    ends: list[dict[str, Any]] = []

    def last_end(event: dict[str, Any]) -> bool:
        if root_end(event):
            ends.append(event)
        return len(ends) == count

    body = {"channels": ["lifecycle", "values"]}
    events = await raw_events(deployment.other_url, thread_id, "sse", body, last_end)
    counts, latest = [], None
    for event in events:
        if event["method"] == "values" and not event["params"]["namespace"]:
            latest = event["params"]["data"]
        elif root_end(event) and latest is not None:
            counts.append(latest["word_count"])  # each run's last values
    assert counts == list(range(1, count + 1))
    assert all(e["params"]["data"]["event"] == "completed" for e in ends)
    seqs = [e["seq"] for e in events]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)


async def test_websocket_frames_follow_the_thread_order_across_subscriptions(
    deployment: Deployment,
) -> None:
    """Two subscriptions on one WebSocket, whose readers look for the thread's next run at
    different moments (the second joined half a poll later): every run's frames still come
    in seq order, so no subscription gets a run's events after another got its end (a
    client pauses its projections on a run's terminal lifecycle, and then never shows
    them)."""
    thread_id = str(uuid.uuid4())
    ws_url = deployment.session_url.replace("http://", "ws://")
    start = {"assistant_id": "pipeline", "input": {"text": "a bb"}, "multitaskStrategy": "enqueue"}
    async with connect(f"{ws_url}/threads/{thread_id}/stream/events") as socket:
        ids = iter(range(1, 100))

        async def send(method: str, params: dict[str, Any]) -> None:
            await socket.send(json.dumps({"id": next(ids), "method": method, "params": params}))

        async def frames_until_ends(count: int) -> list[dict[str, Any]]:
            ends: list[dict[str, Any]] = []

            def enough(frame: dict[str, Any]) -> bool:
                if frame.get("type") == "event" and root_end(frame):
                    ends.append(frame)
                return len(ends) == count

            return await collect(_frames(socket), enough)

        await send("run.start", start)
        await send("subscription.subscribe", {"channels": ["lifecycle"]})
        await frames_until_ends(1)
        await asyncio.sleep(NEXT_RUN_POLL_SECONDS / 2)
        await send("subscription.subscribe", {"channels": ["values", "lifecycle"]})
        await frames_until_ends(1)  # the second subscription's replay of the first run
        for _ in range(3):
            await send("run.start", start)
            seqs = [f["seq"] for f in await frames_until_ends(2) if f.get("type") == "event"]
            assert seqs == sorted(seqs), seqs


async def _frames(socket: Any) -> AsyncIterator[dict[str, Any]]:
    async for raw in socket:
        yield json.loads(raw)
