"""MCP tools made from assistants, named, described and shaped as LangGraph Platform does."""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable
from typing import Any

import mcp_types as types
from jsonschema import Draft202012Validator

from runyard.domain.assistant import AssistantRecord

# MCP tool names: ASCII letters, digits, `_`, `-` and `.`, at most 128 characters.
_INVALID_NAME_CHARS = re.compile(r"[^a-zA-Z0-9_\-.]")
_MAX_NAME_LENGTH = 128

# LangChain's message models, which an LLM calling the tool cannot be expected to build.
_MESSAGE_TYPES = frozenset(
    f"{kind}{suffix}"
    for kind in ("AI", "Human", "Chat", "System", "Function", "Tool")
    for suffix in ("Message", "MessageChunk")
)
_MESSAGE_SUPPORT_TYPES = frozenset(
    {
        "ToolCall",
        "ToolCallChunk",
        "InvalidToolCall",
        "UsageMetadata",
        "InputTokenDetails",
        "OutputTokenDetails",
    }
)
_REF_PREFIX = "#/$defs/"
MESSAGE_DESCRIPTION = "The user message to send to the agent."


def tool_name(assistant_name: str) -> str:
    """The MCP tool name of an assistant: its name with whitespace as `_`, other marks dropped."""
    name = re.sub(r"\s+", "_", assistant_name.strip())
    return _INVALID_NAME_CHARS.sub("", name)[:_MAX_NAME_LENGTH]


def tool_for(assistant: AssistantRecord, input_schema: dict[str, Any] | None) -> types.Tool:
    """The tool an assistant is: its name, description and the graph's input schema."""
    schema = simplified_schema(input_schema or {})
    return types.Tool(
        name=tool_name(assistant.name),
        title=assistant.name,
        description=assistant.description or f"Tool based on the {assistant.name} assistant",
        input_schema=schema,
        annotations=types.ToolAnnotations(
            read_only_hint=False,
            destructive_hint=False,
            idempotent_hint=False,
            open_world_hint=True,
        ),
    )


def simplified_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """The input schema with lists of LangChain messages reduced to one user message (a string).

    A `messages` channel accepts a plain string (LangGraph turns it into a human message),
    and a model calling the tool writes a string far more reliably than message objects.
    """
    return _with_messages_as(
        schema,
        lambda key, prop: {
            "type": "string",
            "title": prop.get("title", key),
            "description": MESSAGE_DESCRIPTION,
        },
    )


def arguments_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """What `tools/call` accepts: the declared schema, where a messages field also takes the
    graph's own input (a list of messages or one message, as LangGraph coerces them).

    The exact shape of a message is left to the graph: LangGraph takes role dicts, LangChain
    dicts, strings and (role, content) pairs, more than the message schemas describe.
    """
    return _with_messages_as(
        schema,
        lambda key, prop: {
            "title": prop.get("title", key),
            "type": ["string", "array", "object"],
            "items": {"type": ["string", "object", "array"]},
        },
    )


def _with_messages_as(
    schema: dict[str, Any], replacement: Callable[[str, dict[str, Any]], dict[str, Any]]
) -> dict[str, Any]:
    """The schema with each list-of-messages property replaced, message definitions dropped."""
    schema = copy.deepcopy(schema)
    defs = schema.get("$defs")
    if defs and set(defs) & _MESSAGE_TYPES:
        for name in _MESSAGE_TYPES | _MESSAGE_SUPPORT_TYPES:
            defs.pop(name, None)
        if not defs:
            del schema["$defs"]
        properties = schema.get("properties", {})
        for key, prop in list(properties.items()):
            if _lists_messages(prop):
                properties[key] = replacement(key, prop)
    # MCP requires an object schema.
    schema.setdefault("type", "object")
    return schema


def _lists_messages(prop: dict[str, Any]) -> bool:
    if prop.get("type") != "array":
        return False
    items = prop.get("items", {})
    for candidate in items.get("oneOf") or items.get("anyOf") or []:
        ref = candidate.get("$ref", "")
        if ref.startswith(_REF_PREFIX) and ref[len(_REF_PREFIX) :] in _MESSAGE_TYPES:
            return True
    return False


def argument_problems(schema: dict[str, Any], arguments: dict[str, Any]) -> list[str]:
    """What is wrong with the arguments for this input schema, one line per problem."""
    validator = Draft202012Validator(schema)
    problems = []
    for error in sorted(validator.iter_errors(arguments), key=lambda e: list(e.path)):
        where = ".".join(str(part) for part in error.path) or "arguments"
        problems.append(f"{where}: {error.message}")
    return problems


def call_result(output: Any) -> types.CallToolResult:
    """The tool result of a finished run: its error, its pending interrupt, or its output."""
    if isinstance(output, dict) and "__error__" in output:
        error = output["__error__"] or {}
        text = f"{error.get('error', 'Error')}: {error.get('message', '')}".rstrip(": ")
        return types.CallToolResult(content=[types.TextContent(text=text)], is_error=True)
    if isinstance(output, dict) and "__interrupt__" in output:
        text = (
            "the graph paused for input (an interrupt), which a stateless tool call cannot "
            "answer; use the Agent Protocol or A2A to continue a thread: "
            + json.dumps(output["__interrupt__"], ensure_ascii=False, default=str)
        )
        return types.CallToolResult(content=[types.TextContent(text=text)], is_error=True)
    text = json.dumps(output, ensure_ascii=False, default=str)
    return types.CallToolResult(
        content=[types.TextContent(text=text)],
        structured_content=output if isinstance(output, dict) else None,
    )
