"""What the thread session's WebSocket does with frames and paths it cannot use: it closes with
a documented code (docs/runs.md, the thread streaming session), never with a traceback or a bare
HTTP refusal a browser cannot read."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from tests.support.server import ServerProcess

TIMEOUT = 10


def socket_url(server: ServerProcess, thread_id: str) -> str:
    return server.url.replace("http://", "ws://") + f"/threads/{thread_id}/stream/events"


async def test_a_binary_frame_closes_with_1003_and_no_traceback(server: ServerProcess) -> None:
    logged = server.log_path.stat().st_size
    async with connect(socket_url(server, str(uuid.uuid4()))) as socket:
        await socket.send(b'{"id": 1, "method": "agent.getTree"}')
        with pytest.raises(ConnectionClosed) as closed:
            await asyncio.wait_for(socket.recv(), TIMEOUT)
    assert closed.value.rcvd is not None
    assert closed.value.rcvd.code == 1003
    assert "text" in closed.value.rcvd.reason
    await asyncio.sleep(0.2)  # the server writes its log line, if any, as it closes
    with server.log_path.open("rb") as log:
        log.seek(logged)
        assert b"Traceback" not in log.read()


async def test_a_malformed_thread_id_closes_with_4422(server: ServerProcess) -> None:
    async with connect(socket_url(server, "not-a-uuid")) as socket:
        with pytest.raises(ConnectionClosed) as closed:
            await asyncio.wait_for(socket.recv(), TIMEOUT)
    assert closed.value.rcvd is not None
    assert closed.value.rcvd.code == 4422
    assert "thread id" in closed.value.rcvd.reason
