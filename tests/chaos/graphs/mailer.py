"""An agent whose tools have side effects, for the at-most-once tests: a scripted model asks
for the tool calls its input plans, LangGraph's ToolNode makes them, and every tool appends
a JSON line to the file the run's config names (`mailer_log`), with its pid and the run's
attempt, so a test counts the calls from outside the server.

`send_email` (async) and `charge_card` (sync, interrupting on an unknown outcome) are
marked at most once; `lookup` is not. A tool takes the seconds its input plans on the run's
first attempt only, so a test can strike inside it; the ToolNode's wrapper logs each call
before the tool starts and, on the first attempt, holds the process `gate_seconds` there.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, Any

from langchain_core.messages import AIMessage, AnyMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.config import get_config
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.types import Command
from typing_extensions import TypedDict

from runyard.tools import at_most_once, idempotency_key


class MailerState(TypedDict, total=False):
    """The tool calls the model asks for (tool name: seconds it takes on the first attempt),
    how long the gate holds the first attempt, and the conversation."""

    calls: dict[str, float]
    gate_seconds: float
    messages: Annotated[list[AnyMessage], add_messages]


def log_call(tool_name: str, phase: str, **fields: Any) -> dict[str, Any]:
    """Append one JSON line for a tool call of the run in hand to the file its config names
    (`mailer_log`), and return it."""
    config = get_config()
    line = {
        "run_id": str(config["configurable"]["run_id"]),
        "attempt": int(config["metadata"]["run_attempt"]),
        "pid": os.getpid(),
        "tool": tool_name,
        "phase": phase,
        "t": time.time(),
        **fields,
    }
    path = config["configurable"]["mailer_log"]
    with Path(path).open("a", encoding="utf-8") as out:
        out.write(json.dumps(line) + "\n")
    return line


def first_attempt() -> bool:
    """True on the run's first attempt."""
    return int(get_config()["metadata"]["run_attempt"]) == 1


async def take(seconds: float) -> None:
    """On the first attempt, take `seconds`; a negative number: until the test releases the
    call (a file named as the log, plus `.release`)."""
    if not first_attempt():
        return
    if seconds >= 0:
        await asyncio.sleep(seconds)
        return
    release = Path(get_config()["configurable"]["mailer_log"] + ".release")
    while not release.exists():  # noqa: ASYNC110 (another process writes it)
        await asyncio.sleep(0.05)


@tool
@at_most_once
async def send_email(to: str, seconds: float = 0.0) -> str:
    """Send an e-mail to `to`."""
    line = log_call("send_email", "start", key=idempotency_key())
    await take(seconds)
    log_call("send_email", "done")
    return f"sent to {to} by attempt {line['attempt']}"


@tool
@at_most_once(on_unknown="interrupt")
def charge_card(amount: int, seconds: float = 0.0) -> str:
    """Charge the card `amount` cents."""
    line = log_call("charge_card", "start", key=idempotency_key())
    if first_attempt():
        time.sleep(seconds)
    log_call("charge_card", "done")
    return f"charged {amount} by attempt {line['attempt']}"


@tool
async def lookup(query: str, seconds: float = 0.0) -> str:
    """Look `query` up (no side effect)."""
    line = log_call("lookup", "start")
    await take(seconds)
    log_call("lookup", "done")
    return f"found {query} by attempt {line['attempt']}"


ARGS = {"send_email": {"to": "ada@example.com"}, "charge_card": {"amount": 1200}}


def model(state: MailerState) -> dict[str, Any]:
    """The scripted model: first the planned tool calls, then a last word."""
    if any(isinstance(message, ToolMessage) for message in state.get("messages", [])):
        return {"messages": [AIMessage(content="all done")]}
    calls = [
        {
            "id": f"call-{name}",
            "name": name,
            "args": {**ARGS.get(name, {"query": "weather"}), "seconds": float(seconds)},
        }
        for name, seconds in state.get("calls", {}).items()
    ]
    return {"messages": [AIMessage(content="", tool_calls=calls)]}


async def gate(
    request: ToolCallRequest, execute: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command]]
) -> ToolMessage | Command:
    """Log the call before its tool starts; on the first attempt, hold the whole process
    there a while (a blocking sleep, as a pause of the process would): a test freezes it
    there, and once it wakes the attempt goes straight on into the tool, before its lease
    renewal can tell it that another attempt took the run over."""
    state = request.state if isinstance(request.state, dict) else {}
    log_call(request.tool_call["name"], "gate")
    if first_attempt():
        time.sleep(float(state.get("gate_seconds", 0.0)))  # noqa: ASYNC251
    return await execute(request)


def route(state: MailerState) -> str:
    """To the tools while the model asks for some."""
    last = state["messages"][-1]
    return "tools" if isinstance(last, AIMessage) and last.tool_calls else END


_builder = StateGraph(MailerState)
_builder.add_node("model", model)
_builder.add_node("tools", ToolNode([send_email, charge_card, lookup], awrap_tool_call=gate))
_builder.add_edge(START, "model")
_builder.add_conditional_edges("model", route, ["tools", END])
_builder.add_edge("tools", "model")
graph = _builder.compile()
