"""MCP `tools/call` takes a messages graph's input both as declared and in the graph's own shape.

Compared with `langgraph dev` (langgraph-api 0.16.7) side by side: `tools/list` declares a
list of LangChain messages as one string, and `tools/call` runs the graph with that string,
with `{"messages": [{"role": "user", "content": ...}]}` and with `[{"type": "human", ...}]`
alike. Runyard validates the arguments first, so it accepts both forms and still refuses
what fits neither, with the problem named. Through the official `mcp` client.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from mcp.shared.exceptions import MCPError

from runyard.schemas.common import MAX_OFFSET
from tests.support.agent_clients import mcp_client

pytestmark = pytest.mark.timeout(90)

GREETING = "Hello! I am the Runyard example agent. Ask me anything."


@pytest.mark.parametrize(
    "messages",
    [
        "hello",
        [{"role": "user", "content": "hello"}],
        [{"type": "human", "content": "hello"}],
        [{"role": "user", "content": [{"type": "text", "text": "hello"}]}],
        ["hello"],
    ],
    ids=["declared-string", "role-dicts", "langchain-dicts", "content-blocks", "strings"],
)
async def test_a_messages_tool_runs_with_the_declared_and_the_native_input(
    base_url: str, messages: Any
) -> None:
    async with mcp_client(base_url) as mcp:
        result = await mcp.call_tool("agent", {"messages": messages})
    assert not result.is_error, result.content
    output = json.loads(result.content[0].text)
    assert output["messages"][0]["type"] == "human"
    assert output["messages"][-1]["content"] == GREETING


async def test_messages_that_fit_neither_form_are_refused_naming_the_field(base_url: str) -> None:
    async with mcp_client(base_url) as mcp:
        for wrong in (42, None, True):
            with pytest.raises(MCPError) as refused:
                await mcp.call_tool("agent", {"messages": wrong})
            assert refused.value.error.code == -32602
            assert "messages" in refused.value.error.message
            assert "string" in refused.value.error.message


async def test_a_tools_list_cursor_out_of_range_is_invalid_params(base_url: str) -> None:
    async with httpx.AsyncClient(base_url=base_url, timeout=30) as http:
        for cursor in ("502689281629990254699631083520", "-1", str(MAX_OFFSET + 1)):
            message = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
            answer = await http.post(
                "/mcp",
                json={**message, "params": {"cursor": cursor}},
                headers={"Accept": "application/json"},
            )
            assert answer.status_code == 200
            error = answer.json()["error"]
            assert error["code"] == -32602, error
            assert "cursor" in error["message"]
