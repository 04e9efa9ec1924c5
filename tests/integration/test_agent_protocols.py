"""Every assistant is reachable by other agents: MCP at /mcp and A2A at /a2a/{assistant_id}.

Through the protocols' official clients (`mcp`, `a2a-sdk`) on `runyard dev` and `runyard serve`.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from a2a.client.errors import A2AClientError
from a2a.types import CancelTaskRequest, GetTaskRequest, TaskState
from a2a.utils.errors import (
    InternalError,
    InvalidParamsError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from google.protobuf.json_format import MessageToDict
from langgraph_sdk import get_client
from mcp.shared.exceptions import MCPError

from tests.support.agent_clients import (
    a2a_client,
    a2a_client_for_card,
    bearer,
    mcp_client,
    send,
    texts,
    user_message,
)
from tests.support.server import ROOT, ServerProcess
from tests.support.throwaway import ThrowawayPostgres, postgres_tools

pytestmark = pytest.mark.timeout(90)

AUTH_CONFIG = ROOT / "tests" / "graphs" / "langgraph_auth.json"
GREETING = "Hello! I am the Runyard example agent. Ask me anything."


async def test_mcp_lists_a_tool_per_assistant_and_calls_one(base_url: str) -> None:
    async with mcp_client(base_url) as mcp:
        listed = await mcp.list_tools()
        tools = {tool.name: tool for tool in listed.tools}
        assert {"agent", "slow", "fail", "pipeline"} <= set(tools)
        agent = tools["agent"]
        assert agent.description == "Tool based on the agent assistant"
        # A list of LangChain messages is offered as one user message, as LangGraph does.
        assert agent.input_schema["properties"]["messages"]["type"] == "string"
        assert tools["slow"].input_schema["properties"]["seconds"] == {
            "title": "Seconds",
            "type": "number",
        }

        result = await mcp.call_tool("agent", {"messages": "hello"})
    assert not result.is_error
    output = json.loads(result.content[0].text)
    assert output["messages"][-1]["content"] == GREETING
    assert result.structured_content == output


async def test_mcp_bad_input_gets_protocol_errors_a_person_can_act_on(base_url: str) -> None:
    async with mcp_client(base_url) as mcp:
        with pytest.raises(MCPError) as unknown:
            await mcp.call_tool("no_such_tool", {})
        assert unknown.value.error.code == -32602
        assert "unknown tool 'no_such_tool'" in unknown.value.error.message
        assert "agent" in unknown.value.error.message  # names the tools there are

        with pytest.raises(MCPError) as misfit:
            await mcp.call_tool("slow", {"seconds": "soon"})
        assert misfit.value.error.code == -32602
        assert "seconds: 'soon' is not of type 'number'" in misfit.value.error.message

        # A graph that fails is the tool's error, reported as a result, not a protocol error.
        failed = await mcp.call_tool("fail", {"value": 7})
    assert failed.is_error
    assert failed.content[0].text == "ValueError: boom: cannot process 7"


async def test_mcp_without_json_rpc_is_refused_with_400(base_url: str) -> None:
    async with httpx.AsyncClient(base_url=base_url) as http:
        bad = await http.post("/mcp", content=b"{not json", headers={"Accept": "application/json"})
        assert bad.status_code == 400
        assert bad.json()["error"]["code"] == -32700
        unknown = await http.post(
            "/mcp",
            json={"jsonrpc": "2.0", "id": 1, "method": "resources/list"},
            headers={"Accept": "application/json"},
        )
    assert unknown.json()["error"]["code"] == -32601
    assert "tools/call" in unknown.json()["error"]["message"]


async def test_a2a_conversation_in_one_context_sees_its_earlier_turns(base_url: str) -> None:
    async with a2a_client(base_url, "agent") as client:
        [first] = await send(client, user_message("hello"))
    task = first.task
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert texts(task.history[-1].parts) == [GREETING]
    assert texts(task.artifacts[0].parts) == [GREETING]

    async with a2a_client(base_url, "agent", streaming=True) as client:
        events = await send(client, user_message("what time is it", context_id=task.context_id))
        kinds = [event.WhichOneof("payload") for event in events]
        assert kinds[0] == "task" and kinds[-2:] == ["artifact_update", "status_update"]
        second = events[0].task
        assert second.context_id == task.context_id and second.id != task.id
        growing = [
            texts(e.status_update.status.message.parts)[0]
            for e in events
            if e.HasField("status_update") and e.status_update.status.HasField("message")
        ]
        reply = "I run offline, so I cannot see a clock, but the server can."
        assert growing[-1] == reply and len(growing) > 1  # streamed as it was written
        assert texts(events[-2].artifact_update.artifact.parts) == [reply]
        assert events[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED

        got = await client.get_task(GetTaskRequest(id=second.id))
    said = [texts(message.parts)[0] for message in got.history]
    assert said == ["hello", GREETING, "what time is it", reply]


async def test_a2a_cancel_stops_a_running_task(base_url: str) -> None:
    async with a2a_client(base_url, "slow", streaming=True) as client:
        stream = client.send_message(user_message(data={"seconds": 5}))
        first = await anext(stream)
        task_id = first.task.id
        canceled = await client.cancel_task(CancelTaskRequest(id=task_id))
        assert canceled.status.state == TaskState.TASK_STATE_CANCELED
        rest = [event async for event in stream]
        assert rest[-1].status_update.status.state == TaskState.TASK_STATE_CANCELED

        got = await client.get_task(GetTaskRequest(id=task_id))
        assert got.status.state == TaskState.TASK_STATE_CANCELED
        with pytest.raises(TaskNotCancelableError, match="already ended"):
            await client.cancel_task(CancelTaskRequest(id=task_id))


async def test_a2a_send_that_returns_at_once_is_followed_with_tasks_get(base_url: str) -> None:
    request = user_message(data={"seconds": 0.2})
    request.configuration.return_immediately = True
    async with a2a_client(base_url, "slow") as client:
        [submitted] = await send(client, request)
        assert submitted.task.status.state == TaskState.TASK_STATE_SUBMITTED
        for _ in range(300):
            got = await client.get_task(GetTaskRequest(id=submitted.task.id))
            if got.status.state == TaskState.TASK_STATE_COMPLETED:
                break
            assert got.status.state in (
                TaskState.TASK_STATE_SUBMITTED,
                TaskState.TASK_STATE_WORKING,
            )
            await asyncio.sleep(0.1)
    values = MessageToDict(got.artifacts[0].parts[0])["data"]
    assert values["steps"] == ["first", "second"]


async def test_a2a_input_required_task_is_answered_with_its_task_id(base_url: str) -> None:
    async with a2a_client(base_url, "asker") as client:
        [asked] = await send(client, user_message(data={"value": 1}))
        task = asked.task
        assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        question = MessageToDict(task.artifacts[0].parts[0])["data"]["interrupts"][0]["value"]
        assert question == {"question": "continue?", "value": 1}

        answer = user_message("yes", context_id=task.context_id, task_id=task.id)
        [answered] = await send(client, answer)
        assert answered.task.id == task.id  # the same task, now done
        assert answered.task.status.state == TaskState.TASK_STATE_COMPLETED
        values = MessageToDict(answered.task.artifacts[0].parts[0])["data"]
        assert values["seen"] == ["echo", "answer:yes"]
        got = await client.get_task(GetTaskRequest(id=task.id))
        assert got.status.state == TaskState.TASK_STATE_COMPLETED

        with pytest.raises(UnsupportedOperationError, match="does not wait for input"):
            await send(client, answer)


async def test_a2a_bad_input_gets_protocol_errors_a_person_can_act_on(base_url: str) -> None:
    async with a2a_client(base_url, "slow") as client:
        with pytest.raises(InvalidParamsError, match="no 'messages' input") as textual:
            await send(client, user_message("please hurry"))
        assert "seconds" in str(textual.value)  # names the input fields that would fit
        with pytest.raises(TaskNotFoundError):
            await client.get_task(GetTaskRequest(id=str(uuid.uuid4())))
        with pytest.raises(InvalidParamsError, match="contextId"):
            await send(client, user_message(data={"seconds": 0}, context_id="my-chat"))

    ghost = f"{base_url}/a2a/{uuid.uuid4()}"
    async with a2a_client_for_card(ghost) as client:
        with pytest.raises(InvalidParamsError, match="not found"):
            await send(client, user_message("hello"))
    async with httpx.AsyncClient(base_url=base_url) as http:
        card = await http.get(f"/a2a/{uuid.uuid4()}/.well-known/agent-card.json")
    assert card.status_code == 404


async def test_a2a_0_3_clients_use_message_send(base_url: str) -> None:
    """The 0.3 method names (message/send, tasks/get) answer in the 0.3 shapes."""
    async with httpx.AsyncClient(base_url=base_url) as http:
        card = (await http.get("/a2a/agent/.well-known/agent-card.json")).json()
        assert (await http.get("/a2a/agent")).json() == card
        root = await http.get("/.well-known/agent-card.json", params={"assistant_id": "agent"})
        assert root.json() == card
        unnamed = await http.get("/.well-known/agent-card.json")
        assert unnamed.status_code == 422 and "assistant_id" in unnamed.json()["detail"]
        # Stateless streamable HTTP: no server-initiated stream, no session to end.
        for method in ("GET", "DELETE"):
            refused = await http.request(method, "/mcp")
            assert refused.status_code == 405 and refused.headers["allow"] == "POST"
    assert card["url"].endswith(f"/a2a/{card['skills'][0]['id'].removesuffix('-main')}")
    async with a2a_client_for_card(card["url"], protocol_version="0.3") as client:
        [event] = await send(client, user_message("hello"))
        got = await client.get_task(GetTaskRequest(id=event.task.id))
    assert got.status.state == TaskState.TASK_STATE_COMPLETED
    assert texts(got.history[-1].parts) == [GREETING]


@pytest.fixture(scope="module")
def auth_dev(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """`runyard dev` with the test auth handlers (every resource belongs to its creator)."""
    proc = ServerProcess("dev", tmp_path_factory.mktemp("agents-auth"), config=AUTH_CONFIG)
    proc.start()
    try:
        yield proc
    finally:
        proc.stop()


async def test_both_endpoints_honour_auth(auth_dev: ServerProcess) -> None:
    owner = get_client(url=auth_dev.url, api_key=None, headers=bearer("user-a"))
    try:
        mine = await owner.assistants.create(graph_id="agent", name="helper of a")
    finally:
        await owner.http.client.aclose()
    async with httpx.AsyncClient(base_url=auth_dev.url) as http:
        for path in ("/mcp", f"/a2a/{mine['assistant_id']}"):
            anonymous = await http.post(path, json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
            assert anonymous.status_code == 401, path

    async with mcp_client(auth_dev.url, "user-a") as mcp:
        assert [tool.name for tool in (await mcp.list_tools()).tools] == ["helper_of_a"]
        result = await mcp.call_tool("helper_of_a", {"messages": "hi"})
        assert not result.is_error
    async with mcp_client(auth_dev.url, "user-b") as mcp:
        assert (await mcp.list_tools()).tools == []
        with pytest.raises(MCPError, match="unknown tool"):
            await mcp.call_tool("helper_of_a", {"messages": "hi"})

    async with a2a_client(auth_dev.url, mine["assistant_id"], token="user-a") as client:
        [event] = await send(client, user_message("hello"))
    assert event.task.status.state == TaskState.TASK_STATE_COMPLETED
    ghost = f"{auth_dev.url}/a2a/{mine['assistant_id']}"
    async with a2a_client_for_card(ghost) as client:
        with pytest.raises(A2AClientError, match="401"):
            await send(client, user_message("hello"))
    async with httpx.AsyncClient(base_url=auth_dev.url, headers=bearer("user-b")) as http:
        card = await http.get(f"/a2a/{mine['assistant_id']}/.well-known/agent-card.json")
        assert card.status_code == 404
        get = {"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": {"id": event.task.id}}
        task = await http.post(
            f"/a2a/{mine['assistant_id']}",
            json=get,
            headers={"Accept": "application/json"},
        )
    assert task.json()["error"]["code"] == -32602, task.text  # the assistant is not theirs


async def test_http_switches_turn_both_endpoints_off(tmp_path: Path) -> None:
    config = tmp_path / "langgraph.json"
    config.write_text(
        json.dumps(
            {
                "graphs": {"agent": str(ROOT / "examples" / "chat.py") + ":graph"},
                "http": {"disable_mcp": True, "disable_a2a": True},
            }
        )
    )
    proc = ServerProcess("dev", tmp_path / "server", config=config)
    await asyncio.to_thread(proc.start)
    try:
        async with httpx.AsyncClient(base_url=proc.url) as http:
            mcp = await http.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
            a2a = await http.post("/a2a/agent", json={"jsonrpc": "2.0", "id": 1, "method": "x"})
            card = await http.get("/a2a/agent/.well-known/agent-card.json")
            runs = await http.post("/runs/wait", json={"assistant_id": "agent", "input": {}})
    finally:
        await asyncio.to_thread(proc.stop)
    assert mcp.status_code == 404
    assert a2a.status_code == 404
    assert card.status_code == 404
    assert runs.status_code == 200  # the Agent Protocol itself stays on


@pytest.mark.slow
async def test_a_database_outage_is_the_servers_error_not_the_callers(tmp_path: Path) -> None:
    tools = postgres_tools()
    if tools is None:
        pytest.skip("initdb/pg_ctl not installed: the PostgreSQL outage is not covered here")
    database = await asyncio.to_thread(ThrowawayPostgres(tools).init)
    proc = ServerProcess(
        "serve", tmp_path / "server", env={"DATABASE_URL": database.url, "REDIS_URL": ""}
    )
    try:
        await asyncio.to_thread(proc.start)
        async with mcp_client(proc.url) as mcp:
            assert "agent" in {tool.name for tool in (await mcp.list_tools()).tools}
            await asyncio.to_thread(database.stop)
            with pytest.raises(MCPError) as listing:
                await mcp.list_tools()
        assert listing.value.error.code == -32603
        assert "unavailable" in listing.value.error.message
        async with a2a_client_for_card(f"{proc.url}/a2a/agent") as client:
            with pytest.raises(InternalError, match="unavailable"):
                await send(client, user_message("hello"))
    finally:
        await asyncio.to_thread(proc.stop)
        await asyncio.to_thread(database.destroy)
