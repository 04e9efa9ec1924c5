"""The JSON-RPC side of `/mcp`: initialize, ping, tools/list and tools/call on assistants."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import mcp_types as types
from fastapi import Request, Response
from fastapi.responses import JSONResponse
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, LATEST_HANDSHAKE_VERSION
from pydantic import ValidationError

from runyard import __version__
from runyard.api.deps import RunServices
from runyard.api.errors import STORE_OUTAGE_MESSAGE, is_store_outage
from runyard.api.run_access import authorize_new_run
from runyard.api.sse import EventStream
from runyard.auth.handlers import Caller
from runyard.domain.assistant import AssistantRecord
from runyard.domain.errors import RunyardError
from runyard.schemas.assistants import AssistantSearch
from runyard.schemas.common import MAX_OFFSET
from runyard.schemas.mcp import (
    argument_problems,
    arguments_schema,
    call_result,
    tool_for,
    tool_name,
)
from runyard.schemas.runs import RunCreate
from runyard.streaming.broker import StreamEvent
from runyard.streaming.sse_frames import sse_frame

log = logging.getLogger("runyard.mcp")

PAGE_SIZE = 100
# A tool: its assistant, the tool itself, and the schema its arguments must fit.
Tool = tuple[AssistantRecord, types.Tool, dict[str, Any]]
SUPPORTED_METHODS = "initialize, ping, tools/list and tools/call"


@dataclass(frozen=True)
class Call:
    """Who calls, and what the server adds to the `configurable` of the runs they make."""

    caller: Caller
    configurable: dict[str, Any]


class McpError(Exception):
    """A JSON-RPC error to answer with (code and a message a person can act on)."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.error = types.ErrorData(code=code, message=message, data=data)


async def answer(
    svc: RunServices, caller: Caller, configurable: dict[str, Any], request: Request
) -> Response:
    """The HTTP answer to one JSON-RPC message posted to /mcp.

    `configurable` is what the server adds to a run's `configurable` (the user, headers).
    """
    try:
        message = json.loads(await request.body())
    except ValueError:
        return _http_error(types.PARSE_ERROR, "the body is not valid JSON")
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
        return _http_error(types.INVALID_REQUEST, "send one JSON-RPC 2.0 object (no batches)")
    if "method" not in message or "id" not in message:
        return Response(status_code=202)  # a notification or a response: nothing to answer
    try:
        rpc = types.JSONRPCRequest.model_validate(message)
    except ValidationError as exc:
        return _http_error(
            types.INVALID_REQUEST, f"not a JSON-RPC request: {exc.errors()[0]['msg']}"
        )
    if rpc.method == "tools/call" and "text/event-stream" in request.headers.get("accept", ""):
        # A run may take long: keep-alives hold the connection open until its result.
        return _sse_answer(svc, lambda: _answer(svc, Call(caller, configurable), rpc))
    return JSONResponse(_dump(await _answer(svc, Call(caller, configurable), rpc)))


async def _answer(
    svc: RunServices, call: Call, rpc: types.JSONRPCRequest
) -> types.JSONRPCResponse | types.JSONRPCError:
    try:
        result = await _dispatch(svc, call, rpc.method, rpc.params or {})
    except McpError as exc:
        return types.JSONRPCError(jsonrpc="2.0", id=rpc.id, error=exc.error)
    except RunyardError as exc:
        code = types.INTERNAL_ERROR if exc.status_code >= 500 else types.INVALID_PARAMS
        return types.JSONRPCError(
            jsonrpc="2.0", id=rpc.id, error=types.ErrorData(code=code, message=exc.message)
        )
    except Exception as exc:
        if is_store_outage(exc):
            log.warning("mcp_store_unavailable method=%s error=%s", rpc.method, type(exc).__name__)
            message = STORE_OUTAGE_MESSAGE
        else:
            log.exception("mcp_request_failed method=%s", rpc.method)
            message = "internal server error; see the server log"
        error = types.ErrorData(code=types.INTERNAL_ERROR, message=message)
        return types.JSONRPCError(jsonrpc="2.0", id=rpc.id, error=error)
    return types.JSONRPCResponse(
        jsonrpc="2.0", id=rpc.id, result=result.model_dump(by_alias=True, exclude_none=True)
    )


async def _dispatch(
    svc: RunServices, call: Call, method: str, params: dict[str, Any]
) -> types.Result:
    if method == "initialize":
        requested = params.get("protocolVersion")
        version = (
            requested if requested in HANDSHAKE_PROTOCOL_VERSIONS else LATEST_HANDSHAKE_VERSION
        )
        return types.InitializeResult(
            protocol_version=version,
            capabilities=types.ServerCapabilities(tools=types.ToolsCapability(list_changed=False)),
            server_info=types.Implementation(name="Runyard", version=__version__),
        )
    if method == "ping":
        return types.EmptyResult()
    if method == "tools/list":
        return await _list_tools(svc, call.caller, params.get("cursor"))
    if method == "tools/call":
        return await _call_tool(svc, call, params)
    raise McpError(
        types.METHOD_NOT_FOUND,
        f"method {method!r} is not served here; /mcp serves {SUPPORTED_METHODS}",
    )


async def _list_tools(svc: RunServices, caller: Caller, cursor: Any) -> types.ListToolsResult:
    try:
        offset = int(cursor or 0)
    except (TypeError, ValueError):
        offset = -1
    if not 0 <= offset <= MAX_OFFSET:
        raise McpError(types.INVALID_PARAMS, f"cursor {cursor!r} is not one tools/list gave")
    rows = await _assistants_page(svc, caller, offset)
    tools = [tool for _, tool, _ in await _tools(svc, rows)]
    next_cursor = str(offset + PAGE_SIZE) if len(rows) == PAGE_SIZE else None
    return types.ListToolsResult(tools=tools, next_cursor=next_cursor)


async def _call_tool(svc: RunServices, call: Call, params: dict[str, Any]) -> types.CallToolResult:
    try:
        request = types.CallToolRequestParams.model_validate(params)
    except ValidationError as exc:
        raise McpError(types.INVALID_PARAMS, f"tools/call needs a tool name: {exc}") from None
    assistant, tool, accepted = await _find_tool(svc, call.caller, request.name)
    arguments = request.arguments or {}
    problems = argument_problems(accepted, arguments)
    if problems:
        raise McpError(
            types.INVALID_PARAMS,
            f"the arguments do not fit the input schema of tool {request.name!r}: "
            + "; ".join(problems),
            data={"problems": problems, "inputSchema": tool.input_schema},
        )
    body = RunCreate(assistant_id=assistant.assistant_id, input=arguments)
    await authorize_new_run(svc.threads, svc.assistants, call.caller, None, body)
    _, output = await svc.waits.run_to_end(None, body, configurable=call.configurable)
    return call_result(output)


async def _find_tool(svc: RunServices, caller: Caller, name: str) -> Tool:
    """The first assistant (newest first, as tools/list lists them) whose tool has this name."""
    offset, seen = 0, []
    while True:
        page = await _assistants_page(svc, caller, offset)
        for assistant in page:
            if tool_name(assistant.name) == name:
                return (await _tools(svc, [assistant]))[0]
            seen.append(tool_name(assistant.name))
        if len(page) < PAGE_SIZE:
            break
        offset += PAGE_SIZE
    known = ", ".join(sorted(set(seen))) or "none"
    raise McpError(
        types.INVALID_PARAMS, f"unknown tool {name!r}; tools/list names the tools: {known}"
    )


async def _assistants_page(svc: RunServices, caller: Caller, offset: int) -> list[AssistantRecord]:
    search = AssistantSearch(limit=PAGE_SIZE, offset=offset)
    auth_filter = await caller.authorize("assistants", "search", search.model_dump(mode="json"))
    page, _ = await svc.assistants.search_assistants(search, auth_filter)
    return page


async def _tools(svc: RunServices, assistants: list[AssistantRecord]) -> list[Tool]:
    """The tools of these assistants, one per name (the first wins), skipping unusable graphs:
    each with its assistant and the schema its arguments must fit."""
    schemas = await asyncio.gather(
        *(svc.assistants.get_schemas(assistant.assistant_id) for assistant in assistants),
        return_exceptions=True,
    )
    out: list[Tool] = []
    names: set[str] = set()
    for assistant, schema in zip(assistants, schemas, strict=True):
        name = tool_name(assistant.name)
        if isinstance(schema, BaseException):
            log.warning("mcp_tool_skipped assistant_id=%s error=%s", assistant.assistant_id, schema)
            continue
        if not name or name in names:
            continue
        names.add(name)
        input_schema = schema.get("input_schema") or {}
        out.append((assistant, tool_for(assistant, input_schema), arguments_schema(input_schema)))
    return out


def _dump(message: types.JSONRPCResponse | types.JSONRPCError) -> dict[str, Any]:
    return message.model_dump(by_alias=True, exclude_none=True, mode="json")


def _http_error(code: int, message: str) -> JSONResponse:
    error = types.JSONRPCError(
        jsonrpc="2.0", id=None, error=types.ErrorData(code=code, message=message)
    )
    return JSONResponse(_dump(error), status_code=400)


def _sse_answer(
    svc: RunServices, pending: Callable[[], Awaitable[types.JSONRPCResponse | types.JSONRPCError]]
) -> EventStream:
    async def frames() -> AsyncGenerator[bytes, None]:
        message = await pending()
        data = json.dumps(_dump(message), ensure_ascii=False)
        yield sse_frame(StreamEvent("", "message", data)).encode()

    return EventStream(
        frames(),
        keepalive_seconds=svc.waits.keepalive_seconds,
        keepalive=b": keep-alive\r\n\r\n",
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )
