"""A compiled graph named as the template names it, reading its context like the template.

The template's `call_model` reads `runtime.context.model` and `runtime.context.system_prompt`;
here the node answers with what it read instead of calling the model.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated

from langchain_core.messages import AIMessage, AnyMessage
from langgraph.graph import StateGraph, add_messages
from langgraph.runtime import Runtime

from react_agent.context import Context


@dataclass
class InputState:
    """What a client sends: messages."""

    messages: Annotated[list[AnyMessage], add_messages] = field(default_factory=list)


@dataclass
class State(InputState):
    """The graph's state."""

    is_last_step: bool = False


async def call_model(state: State, runtime: Runtime[Context]) -> dict[str, list[AIMessage]]:
    """Answer with the model and user the run's context names."""
    context = runtime.context
    text = f"model={context.model} user={context.user_id} prompt={context.system_prompt}"
    return {"messages": [AIMessage(content=text)]}


builder = StateGraph(State, input_schema=InputState, context_schema=Context)
builder.add_node(call_model)
builder.add_edge("__start__", "call_model")

graph = builder.compile(name="ReAct Agent")
