"""A generative-UI agent shaped like LangGraph's example: it answers "weather in <city>" with a
message and a `weather` component attached to it, and "forget the weather" by removing the
last component it pushed. No model: the reply is computed, so that tests are exact."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Annotated, Any

from langchain_core.messages import AIMessage, BaseMessage
from langgraph.graph import START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.graph.ui import AnyUIMessage, delete_ui_message, push_ui_message, ui_message_reducer
from typing_extensions import TypedDict


class AgentState(TypedDict):
    """The conversation and the UI components pushed along it."""

    messages: Annotated[Sequence[BaseMessage], add_messages]
    ui: Annotated[Sequence[AnyUIMessage], ui_message_reducer]


def forecast(city: str) -> dict[str, Any]:
    """A made-up forecast that depends only on the city's name."""
    return {"city": city, "temperature": 10 + len(city), "condition": "sunny"}


async def weather(state: AgentState) -> dict[str, Any]:
    """Push the `weather` component for the city asked about, or remove the last one."""
    text = str(state["messages"][-1].content).strip()
    if text.lower().startswith("forget") and state.get("ui"):
        delete_ui_message(state["ui"][-1]["id"])
        return {"messages": [AIMessage(id=str(uuid.uuid4()), content="Forgotten.")]}
    city = text.split(" in ", 1)[-1].strip(" ?.") or "Paris"
    props = forecast(city)
    message = AIMessage(id=str(uuid.uuid4()), content=f"Here is the weather in {city}.")
    push_ui_message("weather", props, message=message)
    return {"messages": [message]}


graph = StateGraph(AgentState).add_node(weather).add_edge(START, "weather").compile()
