"""Every surface answers the caller's own input errors the same way: a NUL character in run
input, an out-of-range or mistyped number, on REST, the thread session (HTTP and WebSocket),
MCP `tools/call` and A2A (`message/send`, `tasks/get`, 0.3 and 1.0 names). The answer names
the field (422; JSON-RPC -32602; an `invalid_argument` reply), and the server's log carries
no SQL statement and no traceback for any of them.

Before, a NUL reached the database: REST answered 422 on PostgreSQL (without the field),
the session `unknown_error`, MCP and A2A -32603, each logging the INSERT with a traceback
(on SQLite the run was accepted). A2A 0.3's historyLength past 32 bits was -32603 with a
traceback from the SDK's conversion.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from websockets.asyncio.client import connect

from tests.support.server import ServerProcess

NUL = "a\u0000b"
LEAKS = ("SQL", "INSERT", "SELECT", "asyncpg", "sqlite", "DataError", "Traceback")
# What the server's log must not show for a caller's error.
LOG_LEAKS = ("INSERT INTO", "SELECT ", "Traceback", "_request_failed", "session_command_failed")
A2A_1_0 = {"A2A-Version": "1.0"}


@pytest.fixture
def quiet_log(server: ServerProcess) -> Iterator[None]:
    """Fails the test if the server logs SQL or a traceback while it runs."""
    start = server.log_path.stat().st_size
    yield
    with server.log_path.open("rb") as log:
        log.seek(start)
        written = log.read().decode(errors="replace")
    leaked = [line for line in written.splitlines() if any(leak in line for leak in LOG_LEAKS)]
    assert not leaked, "\n".join(leaked[:20])


async def rpc(base_url: str, path: str, body: Any, headers: dict[str, str] | None = None) -> Any:
    """POST a JSON-RPC request; its answer's error (the test expects one)."""
    async with httpx.AsyncClient(base_url=base_url, timeout=60) as http:
        answer = await http.post(
            path, json=body, headers={"Accept": "application/json", **(headers or {})}
        )
    assert not any(leak in answer.text for leak in LEAKS), answer.text
    payload = answer.json()
    assert "error" in payload, payload
    return payload["error"]


def send(message_text: str, configuration: dict[str, Any] | None = None) -> dict[str, Any]:
    """An A2A 0.3 `message/send` with one text part."""
    message = {
        "role": "user",
        "messageId": str(uuid.uuid4()),
        "parts": [{"kind": "text", "text": message_text}],
    }
    params: dict[str, Any] = {"message": message}
    if configuration is not None:
        params["configuration"] = configuration
    return {"jsonrpc": "2.0", "id": 5, "method": "message/send", "params": params}


@pytest.mark.usefixtures("quiet_log")
async def test_a_nul_in_run_input_is_the_callers_error_on_every_surface(base_url: str) -> None:
    thread_id = str(uuid.uuid4())
    run = {"assistant_id": "agent", "input": {"messages": [{"role": "user", "content": NUL}]}}
    field = "input.messages.0.content"
    async with httpx.AsyncClient(base_url=base_url, timeout=60) as http:
        rest = await http.post("/runs/wait", json=run)
        assert rest.status_code == 422, rest.text
        assert field in rest.json()["detail"] and "NUL" in rest.json()["detail"]
        command = {"id": 1, "method": "run.start", "params": run}
        session = await http.post(f"/threads/{thread_id}/commands", json=command)
        assert session.status_code == 422, session.text
        assert f"params.{field}" in session.json()["detail"], session.text
        assert (await http.get(f"/threads/{thread_id}")).status_code == 404  # nothing half-made
    ws_url = base_url.replace("http://", "ws://") + f"/threads/{thread_id}/stream/events"
    async with connect(ws_url) as socket:
        await socket.send(json.dumps(command))
        reply = json.loads(await socket.recv())
    assert (reply["type"], reply["id"], reply["error"]) == ("error", 1, "invalid_argument")
    assert f"params.{field}" in reply["message"] and "NUL" in reply["message"], reply
    call = {"name": "agent", "arguments": {"messages": NUL}}
    mcp = await rpc(
        base_url, "/mcp", {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call}
    )
    assert mcp["code"] == -32602, mcp
    assert "params.arguments.messages" in mcp["message"], mcp
    a2a = await rpc(base_url, "/a2a/agent", send(NUL))
    assert a2a["code"] == -32602, a2a
    assert "params.message.parts.0.text" in a2a["message"], a2a


@pytest.mark.usefixtures("quiet_log")
@pytest.mark.parametrize("length", [99_999_999_999, 2**31, -1, "ten", 1.5, True])
async def test_a2a_history_length_out_of_range_or_mistyped_is_invalid_params(
    base_url: str, length: object
) -> None:
    for body, where, headers in [
        (send("hello", {"historyLength": length}), "params.configuration.historyLength", None),
        (
            {
                "jsonrpc": "2.0",
                "id": 6,
                "method": "tasks/get",
                "params": {"id": str(uuid.uuid4()), "historyLength": length},
            },
            "params.historyLength",
            None,
        ),
        (
            {
                "jsonrpc": "2.0",
                "id": 7,
                "method": "SendMessage",
                "params": {
                    "message": {"role": "ROLE_USER", "messageId": "m1", "parts": [{"text": "hi"}]},
                    "configuration": {"historyLength": length},
                },
            },
            "params.configuration.historyLength",
            A2A_1_0,
        ),
    ]:
        error = await rpc(base_url, "/a2a/agent", body, headers)
        assert error["code"] == -32602, (body, error)
        assert where in error["message"], (body, error)


async def test_a2a_history_length_in_range_is_answered(base_url: str) -> None:
    async with httpx.AsyncClient(base_url=base_url, timeout=60) as http:
        answer = await http.post("/a2a/agent", json=send("hello", {"historyLength": 1}))
    task = answer.json()["result"]
    assert task["status"]["state"] == "completed", task
    assert len(task.get("history") or []) <= 1
