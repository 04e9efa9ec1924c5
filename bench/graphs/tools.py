"""An agent step of four tool calls, twice: `plain` with an ordinary tool, `marked` with the
same tool marked `runyard.tools.at_most_once`. A scripted model asks for the calls, then
ends; the tool returns at once, so the difference between the two is the decorator's cost."""

from __future__ import annotations

from typing import Annotated, Any

from langchain_core.messages import AIMessage, AnyMessage, ToolMessage
from langchain_core.tools import BaseTool, tool
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode
from typing_extensions import TypedDict

from runyard.tools import at_most_once

CALLS = 4


class AgentState(TypedDict, total=False):
    """The conversation."""

    messages: Annotated[list[AnyMessage], add_messages]


async def note(text: str) -> str:
    """Note a text."""
    return f"noted {text}"


def model(state: AgentState) -> dict[str, Any]:
    """Ask for CALLS tool calls, then end once they are answered."""
    if any(isinstance(message, ToolMessage) for message in state.get("messages", [])):
        return {"messages": [AIMessage(content="done")]}
    calls = [
        {"id": f"call-{index}", "name": "note", "args": {"text": str(index)}}
        for index in range(CALLS)
    ]
    return {"messages": [AIMessage(content="", tool_calls=calls)]}


def route(state: AgentState) -> str:
    """To the tools while the model asks for some."""
    last = state["messages"][-1]
    return "tools" if isinstance(last, AIMessage) and last.tool_calls else END


def agent(note: BaseTool) -> Any:
    """model ⇄ tools, with `note` as the one tool."""
    builder = StateGraph(AgentState)
    builder.add_node("model", model)
    builder.add_node("tools", ToolNode([note]))
    builder.add_edge(START, "model")
    builder.add_conditional_edges("model", route, ["tools", END])
    builder.add_edge("tools", "model")
    return builder.compile()


plain = agent(tool(note))
marked = agent(tool(at_most_once(note)))
