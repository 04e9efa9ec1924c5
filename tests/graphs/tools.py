"""A graph whose node calls a LangChain tool, for the `tools` stream mode."""

from __future__ import annotations

from typing import Any

from langchain_core.tools import tool
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict


class ToolState(TypedDict, total=False):
    """A number, and what the tool made of it."""

    number: int
    result: int


@tool
def double(number: int) -> int:
    """Double a number."""
    return number * 2


def call_tool(state: ToolState) -> dict[str, Any]:
    """Call the tool on the state's number."""
    return {"result": double.invoke({"number": state.get("number", 0)})}


_builder = StateGraph(ToolState)
_builder.add_node("call_tool", call_tool)
_builder.add_edge(START, "call_tool")
_builder.add_edge("call_tool", END)
graph = _builder.compile()
