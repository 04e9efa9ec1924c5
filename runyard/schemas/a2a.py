"""A2A wire objects (the protocol's own protobuf types) made from runs, threads and messages."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from typing import Any

from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    Artifact,
    Message,
    Part,
    Role,
    Task,
    TaskState,
    TaskStatus,
)
from a2a.utils.errors import ContentTypeNotSupportedError, InvalidParamsError
from google.protobuf.json_format import MessageToDict, ParseDict
from google.protobuf.struct_pb2 import Value
from google.protobuf.timestamp_pb2 import Timestamp

from runyard import __version__
from runyard.domain.assistant import AssistantRecord
from runyard.domain.status import RunStatus

MODES = ["application/json", "text/plain"]
ROLE_OF_TYPE = {"human": Role.ROLE_USER, "user": Role.ROLE_USER, "ai": Role.ROLE_AGENT}
STATE_OF_RUN = {
    RunStatus.PENDING: TaskState.TASK_STATE_SUBMITTED,
    RunStatus.RUNNING: TaskState.TASK_STATE_WORKING,
    RunStatus.SUCCESS: TaskState.TASK_STATE_COMPLETED,
    # A run is `interrupted` only when it was cancelled; a graph's own interrupt ends the run
    # in success and leaves the thread interrupted (input-required).
    RunStatus.INTERRUPTED: TaskState.TASK_STATE_CANCELED,
    RunStatus.ERROR: TaskState.TASK_STATE_FAILED,
    RunStatus.TIMEOUT: TaskState.TASK_STATE_FAILED,
}
TERMINAL_STATES = frozenset(
    {
        TaskState.TASK_STATE_COMPLETED,
        TaskState.TASK_STATE_FAILED,
        TaskState.TASK_STATE_CANCELED,
        TaskState.TASK_STATE_REJECTED,
    }
)


def graph_input(message: Message, input_fields: list[str]) -> dict[str, Any]:
    """The graph input of a message: its text as one chat message, its data parts merged in.

    Raises the protocol's errors when a part cannot be used, naming what would fit instead.
    """
    texts: list[str] = []
    values: dict[str, Any] = {}
    for part in message.parts:
        kind = part.WhichOneof("content")
        if kind == "text":
            texts.append(part.text)
        elif kind == "data":
            data = part_data(part)
            if not isinstance(data, dict):
                raise InvalidParamsError(
                    message="a data part must hold a JSON object; its keys become graph input"
                )
            values.update(data)
        else:
            raise ContentTypeNotSupportedError(
                message="file parts are not supported; send text parts, or data parts "
                "holding a JSON object"
            )
    if not texts and not values:
        raise InvalidParamsError(message="the message has no parts; send a text or a data part")
    if texts:
        if "messages" not in input_fields:
            raise InvalidParamsError(
                message="this assistant's graph has no 'messages' input, so it cannot take "
                f"text parts; send a data part with its input fields: {input_fields}"
            )
        role = "ai" if message.role == Role.ROLE_AGENT else "human"
        chat = {"role": role, "content": "\n\n".join(texts), "id": message.message_id or None}
        values["messages"] = [*values.get("messages", []), chat]
    return values


def resume_value(message: Message) -> Any:
    """What a message answers to a pending interrupt: its data, or its text."""
    for part in message.parts:
        if part.WhichOneof("content") == "data":
            return part_data(part)
    return "\n\n".join(part.text for part in message.parts if part.text)


def part_data(part: Part) -> Any:
    """A data part's JSON value (protobuf carries every number as a double: whole ones are ints)."""
    return _whole_numbers(MessageToDict(part)["data"])


def _whole_numbers(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: _whole_numbers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_whole_numbers(v) for v in value]
    return value


def history(
    messages: list[Any], context_id: str, task_id: str, length: int | None = None
) -> list[Message]:
    """The conversation's human and agent turns as A2A messages, the last `length` of them."""
    out = []
    for item in messages:
        if not isinstance(item, dict):
            continue
        role = ROLE_OF_TYPE.get(str(item.get("type") or item.get("role")))
        text = content_text(item.get("content"))
        if role is None or not text:
            continue  # tool calls, tool results and system prompts are not turns of the talk
        out.append(
            Message(
                message_id=str(item.get("id") or uuid.uuid4()),
                context_id=context_id,
                task_id=task_id,
                role=role,
                parts=[Part(text=text)],
            )
        )
    if length is not None:
        out = out[-length:] if length else []
    return out


def content_text(content: Any) -> str:
    """The text of a LangChain message's content (a string or a list of blocks)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            block if isinstance(block, str) else str(block.get("text", ""))
            for block in content
            if isinstance(block, str) or (isinstance(block, dict) and block.get("type") == "text")
        )
    return ""


def reply_parts(values: Any) -> list[Part]:
    """The agent's answer: its last message of the turn as text, or the values as data."""
    if isinstance(values, dict) and isinstance(values.get("messages"), list):
        for item in reversed(values["messages"]):
            if not isinstance(item, dict):
                continue
            if ROLE_OF_TYPE.get(str(item.get("type"))) == Role.ROLE_USER:
                break  # the turn began here and the agent said nothing after it
            text = content_text(item.get("content"))
            if ROLE_OF_TYPE.get(str(item.get("type"))) == Role.ROLE_AGENT and text:
                return [Part(text=text)]
    return [data_part(values)]


def data_part(value: Any) -> Part:
    """A data part holding a JSON value."""
    part = Part()
    part.data.CopyFrom(ParseDict(json.loads(json.dumps(value, default=str)), Value()))
    return part


def response_artifact(parts: list[Part], assistant_id: str) -> Artifact:
    """The artifact carrying the agent's answer, as LangGraph Platform names it."""
    return Artifact(
        artifact_id=str(uuid.uuid4()),
        name="Assistant Response",
        description=f"Response from assistant {assistant_id}",
        parts=parts,
    )


def agent_message(text: str, context_id: str, task_id: str) -> Message:
    """A message from the agent (for a status)."""
    return Message(
        message_id=str(uuid.uuid4()),
        context_id=context_id,
        task_id=task_id,
        role=Role.ROLE_AGENT,
        parts=[Part(text=text)],
    )


def status(state: Any, message: Message | None = None) -> TaskStatus:
    """A task status stamped now."""
    stamp = Timestamp()
    stamp.FromDatetime(datetime.now(UTC))
    task_status = TaskStatus(state=state, timestamp=stamp)
    if message is not None:
        task_status.message.CopyFrom(message)
    return task_status


def finished_task(
    task_id: str,
    context_id: str,
    assistant_id: str,
    output: Any,
    messages: list[Any],
    history_length: int | None,
) -> Task:
    """The task of a run that has ended, from its /wait result and the thread's messages."""
    task = Task(id=task_id, context_id=context_id)
    task.history.extend(history(messages, context_id, task_id, history_length))
    if isinstance(output, dict) and "__error__" in output:
        error = output["__error__"] or {}
        text = f"Error executing assistant: {error.get('error')}: {error.get('message')}"
        task.status.CopyFrom(
            status(TaskState.TASK_STATE_FAILED, agent_message(text, context_id, task_id))
        )
    elif isinstance(output, dict) and "__interrupt__" in output:
        task.status.CopyFrom(status(TaskState.TASK_STATE_INPUT_REQUIRED))
        artifact = Artifact(
            artifact_id=str(uuid.uuid4()),
            name="Interrupt",
            description="The graph waits for input: answer with a message carrying this taskId",
            parts=[data_part({"interrupts": output["__interrupt__"]})],
        )
        task.artifacts.append(artifact)
    else:
        task.status.CopyFrom(status(TaskState.TASK_STATE_COMPLETED))
        task.artifacts.append(response_artifact(reply_parts(output), assistant_id))
    return task


def agent_card(
    assistant: AssistantRecord, input_schema: dict[str, Any], url: str
) -> dict[str, Any]:
    """The agent card of one assistant, with the fields LangGraph Platform serves."""
    name = assistant.name
    description = assistant.description or f"{name} assistant"
    properties = sorted((input_schema or {}).get("properties", {}))
    card = AgentCard(
        name=name,
        description=description,
        version=__version__,
        supported_interfaces=[
            AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="1.0"),
            AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="0.3"),
        ],
        capabilities=AgentCapabilities(streaming=True, push_notifications=False),
        default_input_modes=MODES,
        default_output_modes=MODES,
        skills=[
            AgentSkill(
                id=f"{assistant.assistant_id}-main",
                name=f"{name} Capabilities",
                description=description,
                tags=["assistant", "langgraph"],
                input_modes=MODES,
                output_modes=MODES,
            )
        ],
    )
    body = MessageToDict(card)
    # The 0.3 card named the endpoint `url`; clients of either version find it.
    body["url"] = url
    body["skills"][0]["metadata"] = {
        "inputSchema": {
            "required": (input_schema or {}).get("required", []),
            "properties": properties,
            "supportsA2A": "messages" in properties,
        }
    }
    return body
