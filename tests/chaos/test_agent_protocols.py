"""MCP and A2A through an API-only instance: another instance executes every run."""

from __future__ import annotations

import asyncio
import json

import pytest
from a2a.types import CancelTaskRequest, GetTaskRequest, TaskState

from tests.chaos.cluster import ClusterFactory
from tests.support.agent_clients import a2a_client, mcp_client, send, texts, user_message
from tests.support.server import TEST_CONFIG

GREETING = "Hello! I am the Runyard example agent. Ask me anything."


@pytest.mark.slow
@pytest.mark.timeout(180)
async def test_mcp_and_a2a_through_the_instance_that_does_not_execute(
    cluster_factory: ClusterFactory,
) -> None:
    cluster = await cluster_factory(1, config=TEST_CONFIG)
    # WORKER_COUNT=0: this instance takes requests and never executes a run.
    api = await asyncio.to_thread(cluster.add, WORKER_COUNT="0")

    async with mcp_client(api.url) as mcp:
        assert "agent" in {tool.name for tool in (await mcp.list_tools()).tools}
        result = await mcp.call_tool("agent", {"messages": "hello"})
    assert not result.is_error, cluster.tails()
    assert json.loads(result.content[0].text)["messages"][-1]["content"] == GREETING

    async with a2a_client(api.url, "agent") as client:
        [first] = await send(client, user_message("hello"))
    assert first.task.status.state == TaskState.TASK_STATE_COMPLETED, cluster.tails()
    async with a2a_client(api.url, "agent", streaming=True) as client:
        events = await send(client, user_message("what time", context_id=first.task.context_id))
        assert events[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED
        got = await client.get_task(GetTaskRequest(id=events[0].task.id))
    said = [texts(message.parts)[0] for message in got.history]
    assert said[:3] == ["hello", GREETING, "what time"] and len(said) == 4

    # A cancel sent to the API-only instance stops the run on the executing one.
    async with a2a_client(api.url, "slow", streaming=True) as client:
        stream = client.send_message(user_message(data={"seconds": 5}))
        task_id = (await anext(stream)).task.id
        await anext(stream)  # working
        canceled = await client.cancel_task(CancelTaskRequest(id=task_id))
        assert canceled.status.state == TaskState.TASK_STATE_CANCELED
        rest = [event async for event in stream]
    assert rest[-1].status_update.status.state == TaskState.TASK_STATE_CANCELED
    [(status,)] = await asyncio.to_thread(
        cluster.sql, "SELECT status FROM runs WHERE run_id = %s", task_id
    )
    assert status == "interrupted"
