"""The thread streaming session behind the auth handlers (a user reaches only their own
threads), and a `since` older than the replay buffer (`resume_gap`, not silence)."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from tests.support.server import ROOT, ServerProcess

pytestmark = pytest.mark.timeout(120)
AUTH_CONFIG = ROOT / "tests" / "graphs" / "langgraph_auth.json"
TIMEOUT = 30.0
REPLAY = 5


def bearer(user: str) -> dict[str, str]:
    """The test auth handler's credentials of `user`."""
    return {"Authorization": f"Bearer {user}"}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """`runyard dev` with auth handlers and a replay buffer of a few events."""
    env = {"RUNYARD_SESSION_REPLAY_EVENTS": str(REPLAY)}
    proc = ServerProcess("dev", tmp_path_factory.mktemp("session-auth"), env=env)
    proc.config = AUTH_CONFIG
    proc.start()
    try:
        yield proc
    finally:
        proc.stop()


async def command(
    http: httpx.AsyncClient, thread_id: str, user: str, method: str, params: dict[str, Any]
) -> httpx.Response:
    """POST one session command as `user`."""
    body = {"id": 1, "method": method, "params": params}
    return await http.post(f"/threads/{thread_id}/commands", json=body, headers=bearer(user))


async def events(
    http: httpx.AsyncClient, thread_id: str, user: str, body: dict[str, Any]
) -> list[dict[str, Any]]:
    """The frames of the events stream up to the run's end (or an error frame)."""

    async def read() -> list[dict[str, Any]]:
        frames: list[dict[str, Any]] = []
        path = f"/threads/{thread_id}/stream/events"
        async with http.stream("POST", path, json=body, headers=bearer(user)) as response:
            assert response.status_code == 200
            async for line in response.aiter_lines():
                if not line.startswith("data: "):
                    continue
                frames.append(json.loads(line[6:]))
                data = frames[-1].get("params", {}).get("data", {})
                if frames[-1]["type"] == "error" or data.get("event") == "completed":
                    return frames
        return frames

    return await asyncio.wait_for(read(), TIMEOUT)


async def finished_thread(http: httpx.AsyncClient, user: str) -> str:
    """A thread of `user` whose one session run (of their own assistant) has completed."""
    created = await http.post("/assistants", json={"graph_id": "agent"}, headers=bearer(user))
    assistant_id = created.json()["assistant_id"]
    thread_id = str(uuid.uuid4())
    hello = {"messages": [{"role": "user", "content": "hello"}]}
    reply = await command(
        http, thread_id, user, "run.start", {"assistant_id": assistant_id, "input": hello}
    )
    assert reply.json()["type"] == "success", reply.text
    await events(http, thread_id, user, {"channels": ["lifecycle"]})
    return thread_id


async def test_a_user_reaches_only_their_own_threads(server: ServerProcess) -> None:
    """Another user's commands, stream and socket on a thread are refused as not found."""
    async with httpx.AsyncClient(base_url=server.url, timeout=TIMEOUT) as http:
        thread_id = await finished_thread(http, "user-a")
        tree = await command(http, thread_id, "user-a", "agent.getTree", {})
        runs = await http.get(f"/threads/{thread_id}/runs", headers=bearer("user-a"))
        tree_assistant = runs.json()[0]["assistant_id"]
        assert tree.json()["result"]["tree"]["status"] == "completed"
        for method, params in (
            ("run.start", {"assistant_id": tree_assistant, "input": {"messages": []}}),
            ("input.respond", {"interrupt_id": "x", "response": 1}),
            ("agent.getTree", {}),
        ):
            refused = await command(http, thread_id, "user-b", method, params)
            assert refused.status_code == 404, (method, refused.text)
        path = f"/threads/{thread_id}/stream/events"
        body = {"channels": ["values"]}
        stream = await http.post(path, json=body, headers=bearer("user-b"))
        assert stream.status_code == 404
        anonymous = await http.post(
            f"/threads/{thread_id}/commands", json={"id": 1, "method": "agent.getTree"}
        )
        assert anonymous.status_code == 401
        runs = await http.get(f"/threads/{thread_id}/runs", headers=bearer("user-a"))
        assert len(runs.json()) == 1  # user-b's refused run.start left nothing
    ws_url = server.url.replace("http://", "ws://") + path
    async with connect(ws_url, additional_headers=bearer("user-b")) as socket:
        with pytest.raises(ConnectionClosed) as closed:
            await asyncio.wait_for(socket.recv(), TIMEOUT)
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 4404


async def test_since_older_than_the_replay_buffer_is_a_resume_gap(server: ServerProcess) -> None:
    """A cursor more than the buffer behind gets `resume_gap`; one within it the exact rest."""
    async with httpx.AsyncClient(base_url=server.url, timeout=TIMEOUT) as http:
        thread_id = await finished_thread(http, "user-a")
        channels = ["values", "updates", "messages", "lifecycle", "input", "custom"]
        full = await events(http, thread_id, "user-a", {"channels": channels})
        last = full[-1]["seq"]
        assert last > REPLAY + 1
        (gap,) = await events(http, thread_id, "user-a", {"channels": channels, "since": 1})
        assert gap["type"] == "error" and gap["error"] == "resume_gap" and gap["id"] is None
        assert gap["min_available_seq"] == last - REPLAY + 1
        rest = await events(
            http, thread_id, "user-a", {"channels": channels, "since": last - REPLAY}
        )
        assert rest == full[-REPLAY:]
    ws_url = server.url.replace("http://", "ws://") + f"/threads/{thread_id}/stream/events"
    async with connect(ws_url, additional_headers=bearer("user-a")) as socket:
        subscribe = {"channels": channels, "since": 1}
        await socket.send(
            json.dumps({"id": 7, "method": "subscription.subscribe", "params": subscribe})
        )
        reply = json.loads(await asyncio.wait_for(socket.recv(), TIMEOUT))
        assert reply["type"] == "success" and reply["id"] == 7
        frame = json.loads(await asyncio.wait_for(socket.recv(), TIMEOUT))
    assert frame["error"] == "resume_gap"
