"""`runyard.tools.at_most_once` outside a Runyard run, and what it changes of a tool: the
tool is called as it is (saying so once), the model's view of it is the same, and misuse is
a clear error. Calls inside a run: tests/integration/test_tool_call_records.py."""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import Annotated, Any

import pytest
from langchain_core.messages import AIMessage, AnyMessage, ToolMessage
from langchain_core.tools import BaseTool, InjectedToolCallId, StructuredTool, tool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode
from typing_extensions import TypedDict

from runyard.domain.errors import ConfigError, RunyardError
from runyard.domain.tool_calls import use_book
from runyard.tools import UnkeyedToolCallError, at_most_once, idempotency_key

pytestmark = pytest.mark.timeout(30)


class State(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]


def tools(keys: list[str]) -> list[BaseTool]:
    @tool
    @at_most_once
    async def send_email(to: str) -> str:
        """Send an e-mail."""
        keys.append(idempotency_key())
        return f"sent to {to}"

    @tool
    @at_most_once(on_unknown="interrupt")
    def charge(amount: int) -> str:
        """Charge a card."""
        keys.append(idempotency_key())
        return f"charged {amount}"

    def notify(channel: str) -> str:
        keys.append(idempotency_key())
        return f"notified {channel}"

    notifier = StructuredTool.from_function(notify, name="notify", description="Notify.")
    return [send_email, charge, at_most_once(notifier)]


CALLS = {
    "send_email": {"id": "c1", "name": "send_email", "args": {"to": "ada"}},
    "charge": {"id": "c2", "name": "charge", "args": {"amount": 3}},
    "notify": {"id": "c3", "name": "notify", "args": {"channel": "ops"}},
}


def graph_of(marked: list[BaseTool]) -> Any:
    calls = [CALLS[t.name] for t in marked]
    builder = StateGraph(State)
    builder.add_node("model", lambda state: {"messages": [AIMessage("", tool_calls=calls)]})
    builder.add_node("tools", ToolNode(marked))
    builder.add_edge(START, "model")
    builder.add_edge("model", "tools")
    builder.add_edge("tools", END)
    return builder.compile()


def contents(state: dict[str, Any]) -> list[str]:
    return [str(m.content) for m in state["messages"] if isinstance(m, ToolMessage)]


def test_outside_a_run_tools_are_called_as_they_are(caplog: pytest.LogCaptureFixture) -> None:
    """`graph.invoke` (the sync tools) and `graph.ainvoke` with no server: every call made,
    a key of its own for each, and one line per tool saying it is not fenced."""
    keys: list[str] = []
    marked = tools(keys)
    with caplog.at_level(logging.INFO, logger="runyard.tools"):
        first = graph_of(marked[1:]).invoke({"messages": []})
        second = asyncio.run(graph_of(marked).ainvoke({"messages": []}))
    assert contents(first) == ["charged 3", "notified ops"]
    assert contents(second) == ["sent to ada", "charged 3", "notified ops"]
    assert len(keys) == 5 and len(set(keys)) == 5
    assert all(uuid.UUID(key) for key in keys)
    unfenced = [r.getMessage() for r in caplog.records if "tool_call_unfenced" in r.getMessage()]
    assert sorted(unfenced) == [
        f"tool_call_unfenced tool={name} reason=outside_runyard_run"
        for name in ("charge", "notify", "send_email")
    ]


def test_the_model_sees_the_tool_unchanged() -> None:
    """The call id the decorator takes is injected by LangChain, never asked of the model;
    a function that takes the id itself keeps it."""

    @tool
    async def plain(to: str, cc: list[str] | None = None) -> str:
        """Send an e-mail."""
        return to

    @tool
    @at_most_once
    async def marked(to: str, cc: list[str] | None = None) -> str:
        """Send an e-mail."""
        return to

    @tool
    @at_most_once
    def own(to: str, tool_call_id: Annotated[str, InjectedToolCallId]) -> str:
        """Send an e-mail."""
        return tool_call_id

    def schema(t: BaseTool) -> Any:
        return convert_to_openai_tool(t)["function"]["parameters"]

    assert schema(marked) == schema(plain)
    assert schema(own) == {k: v for k, v in schema(plain).items() if k != "properties"} | {
        "properties": {"to": schema(plain)["properties"]["to"]},
        "required": ["to"],
    }
    call = {"type": "tool_call", "id": "c9", "name": "own", "args": {"to": "ada"}}
    assert own.invoke(call).content == "c9"


def test_misuse_is_a_clear_error() -> None:
    """A wrong option or target, a key asked for outside a tool, and a marked tool called in
    a run without a tool call to key it by."""
    with pytest.raises(ConfigError, match="on_unknown='ask'"):
        at_most_once(on_unknown="ask")  # type: ignore[call-overload]
    with pytest.raises(ConfigError, match="not int"):
        at_most_once(42)
    with pytest.raises(RunyardError, match="outside a tool marked at_most_once"):
        idempotency_key()

    class Book:
        thread_id = "t"

    (send_email, *_) = tools([])

    async def in_a_run() -> None:
        use_book(Book())  # type: ignore[arg-type]
        await send_email.coroutine(to="ada")  # type: ignore[attr-defined,misc]

    with pytest.raises(UnkeyedToolCallError, match="without a tool call id"):
        asyncio.run(in_a_run())
