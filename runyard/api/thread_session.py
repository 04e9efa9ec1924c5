"""The thread streaming session over HTTP: `POST /threads/{id}/commands` and
`POST /threads/{id}/stream/events` (SSE), as `@langchain/react`'s `useStream` and the
Python SDK's `client.threads.stream()` speak them. The WebSocket on the events path is in
`thread_session_ws`; both share the command dispatch here."""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from runyard.api.deps import (
    CallerDep,
    RunConfigurableDep,
    SessionServices,
    SessionServicesDep,
    SettingsDep,
    ThreadId,
)
from runyard.api.errors import SERVER_ERROR_MESSAGE, is_store_outage
from runyard.api.responses import ErrorBody
from runyard.api.run_access import authorize_new_run
from runyard.api.sse import EventStream, sse_response
from runyard.auth.guards import require_thread
from runyard.auth.handlers import Caller
from runyard.domain.errors import NotFoundError, RunyardError
from runyard.domain.json_bounds import JsonBoundError, load_bounded_json
from runyard.services import session_commands as commands
from runyard.services.thread_session import ResumeGap
from runyard.streaming.broker import StreamEvent
from runyard.streaming.session_events import EventFilter, parse_filter, parse_since

router = APIRouter(tags=["Thread streaming session"])
# How long an events stream waits for the thread `run.start` is creating.
THREAD_WAIT_SECONDS = 2.0
log = logging.getLogger("runyard.session")

KNOWN_COMMANDS = frozenset(
    {
        "run.start",
        "input.respond",
        "agent.getTree",
        "subscription.subscribe",
        "subscription.unsubscribe",
        "subscription.reconnect",
    }
)
_COMMAND_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {
                "schema": {
                    "type": "object",
                    "required": ["id", "method"],
                    "properties": {
                        "id": {"type": "integer"},
                        "method": {
                            "type": "string",
                            "description": "one of "
                            + ", ".join(sorted(KNOWN_COMMANDS))
                            + "; another is answered with an unknown_command error reply",
                        },
                        "params": {"description": "the method's parameters (an object)"},
                    },
                }
            }
        },
    }
}
_EVENTS_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {
                "schema": {
                    "type": "object",
                    "required": ["channels"],
                    "properties": {
                        "channels": {
                            "type": "array",
                            "minItems": 1,
                            "items": {
                                "type": "string",
                                "description": "values, updates, messages, tools, custom, "
                                "custom:<name>, lifecycle, input, tasks or checkpoints",
                            },
                        },
                        "namespaces": {
                            "type": "array",
                            "items": {"type": "array", "items": {"type": "string"}},
                        },
                        "depth": {"type": "integer", "minimum": 0},
                        "since": {"type": "integer", "minimum": 0},
                    },
                }
            }
        },
    }
}


def error_reply(command_id: Any, code: str, message: str) -> dict[str, Any]:
    """A protocol error reply."""
    return {"type": "error", "id": command_id, "error": code, "message": message}


def success_reply(command_id: int, result: dict[str, Any], seq: int = 0) -> dict[str, Any]:
    """A protocol success reply; `seq` is the last event the connection delivered."""
    return {
        "type": "success",
        "id": command_id,
        "result": result,
        "meta": {"applied_through_seq": seq},
    }


def parse_command(raw: bytes | str) -> dict[str, Any] | dict[str, Any]:
    """The command envelope, or an error reply saying what is wrong with it."""
    try:
        payload = load_bounded_json(raw, root="command")
    except JsonBoundError as exc:
        return error_reply(_command_id(raw), "invalid_argument", exc.message)
    except ValueError:
        return error_reply(None, "invalid_argument", "Protocol commands must be valid JSON.")
    if (
        not isinstance(payload, dict)
        or not isinstance(payload.get("id"), int)
        or isinstance(payload.get("id"), bool)
        or not isinstance(payload.get("method"), str)
    ):
        command_id = payload.get("id") if isinstance(payload, dict) else None
        return error_reply(
            command_id,
            "invalid_argument",
            "Protocol commands must include an integer id and string method.",
        )
    return payload


def _command_id(raw: bytes | str) -> Any:
    """The id of a command refused as a whole, if it can be read."""
    try:
        payload = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    command_id = payload.get("id") if isinstance(payload, dict) else None
    return command_id if isinstance(command_id, int) else None


async def dispatch(
    svc: SessionServices,
    caller: Caller,
    configurable: dict[str, Any],
    thread_id: str,
    command: dict[str, Any],
    seq: int = 0,
) -> dict[str, Any]:
    """Run one command: its reply, success or error (a hidden thread raises NotFoundError)."""
    command_id, method = command["id"], command["method"]
    params = command.get("params", {})
    if method not in KNOWN_COMMANDS:
        return error_reply(command_id, "unknown_command", f"Unknown protocol command: {method}")
    if not isinstance(params, dict):
        return error_reply(command_id, "invalid_argument", "params must be an object.")
    try:
        result = await _run(svc, caller, configurable, thread_id, method, params)
    except commands.CommandError as exc:
        return error_reply(command_id, exc.code, exc.message)
    except NotFoundError:
        raise
    except RunyardError as exc:
        if exc.status_code in (401, 403):
            raise
        return error_reply(command_id, "invalid_argument", exc.message)
    except Exception as exc:
        if is_store_outage(exc):
            raise
        log.exception("session_command_failed thread_id=%s method=%s", thread_id, method)
        # The exception's text may hold SQL, a driver's message or a value: the log has it.
        return error_reply(command_id, "unknown_error", SERVER_ERROR_MESSAGE)
    return success_reply(command_id, result, seq)


async def _run(
    svc: SessionServices,
    caller: Caller,
    configurable: dict[str, Any],
    thread_id: str,
    method: str,
    params: dict[str, Any],
) -> dict[str, Any]:
    # Another user's thread answers 404, as the run routes do.
    await require_thread(svc.threads, caller, thread_id, "read", missing_ok=True)
    if method == "run.start":
        body = commands.run_body(params)
        owner = await _authorize_run(svc, caller, thread_id, body)
        run = await svc.commands.start_run(thread_id, body, configurable, owner)
        return {"run_id": run.run_id}
    if method == "input.respond":
        body = await svc.commands.resume_body(thread_id, params)
        await _authorize_run(svc, caller, thread_id, body)
        await svc.commands.start_run(thread_id, body, configurable, None)
        return {}
    if method == "agent.getTree":
        return {"tree": await svc.commands.agent_tree(thread_id)}
    if method == "subscription.subscribe":
        wanted = parse_filter(params)
        if isinstance(wanted, str):
            raise commands.CommandError("invalid_argument", wanted)
        # Over HTTP a subscription lives as long as its answer: the events stream carries
        # its own filter. The WebSocket keeps subscriptions for the connection.
        return {"subscription_id": str(uuid.uuid4()), "replayed_events": 0}
    if method == "subscription.unsubscribe":
        raise commands.CommandError(
            "no_such_subscription", f"Unknown subscription: {params.get('subscription_id')}"
        )
    raise commands.CommandError("no_such_run", "No active run is bound to this thread.")


async def _authorize_run(
    svc: SessionServices, caller: Caller, thread_id: str, body: Any
) -> dict[str, Any] | None:
    """The checks of a new run; the thread was checked already: a hidden assistant is a
    bad argument of the command."""
    try:
        return await authorize_new_run(svc.threads, svc.assistants, caller, thread_id, body)
    except NotFoundError as exc:
        raise commands.CommandError("invalid_argument", exc.message) from None


_REPLY_ERROR = {
    "type": "object",
    "required": ["type", "id", "error", "message"],
    "properties": {
        "type": {"const": "error"},
        "id": {},
        "error": {"type": "string"},
        "message": {"type": "string"},
    },
}
_TOO_LARGE = {"model": ErrorBody, "description": "the request body is too large"}


@router.post(
    "/threads/{thread_id}/commands",
    openapi_extra=_COMMAND_BODY,
    responses={
        400: {
            "description": "not a command envelope (JSON with an integer id and a method)",
            "content": {"application/json": {"schema": _REPLY_ERROR}},
        },
        413: _TOO_LARGE,
    },
)
async def thread_command(
    thread_id: ThreadId,
    request: Request,
    svc: SessionServicesDep,
    caller: CallerDep,
    configurable: RunConfigurableDep,
) -> JSONResponse:
    """Run one session command (`run.start`, `input.respond`, `agent.getTree`,
    `subscription.*`) and answer its reply: `{"type": "success", "id", "result", "meta"}` or
    `{"type": "error", "id", "error", "message"}`. A malformed envelope answers 400."""
    command = parse_command(await request.body())
    if command.get("type") == "error":
        return JSONResponse(command, status_code=400)
    reply = await dispatch(svc, caller, configurable, str(thread_id), command)
    return JSONResponse(reply)


@router.post(
    "/threads/{thread_id}/stream/events",
    response_class=EventStream,
    openapi_extra=_EVENTS_BODY,
    responses={
        400: {"model": ErrorBody, "description": "a body that is no valid stream request"},
        413: _TOO_LARGE,
    },
)
async def thread_event_stream(
    thread_id: ThreadId,
    request: Request,
    svc: SessionServicesDep,
    settings: SettingsDep,
    caller: CallerDep,
) -> Any:
    """Stream the thread's session events (SSE: `event: <method>`, `id: <seq>`), every run
    from the first, then live. `channels` picks what to receive, `namespaces`/`depth`
    which subgraphs, `since` resumes after that seq (a cursor older than the replay
    buffer gets a `resume_gap` error frame)."""
    try:
        params = json.loads(await request.body())
    except ValueError:
        return JSONResponse({"detail": "the request body is not valid JSON"}, status_code=400)
    wanted = parse_filter(params)
    since = parse_since(params) if isinstance(params, dict) else None
    if isinstance(wanted, str) or isinstance(since, str):
        return JSONResponse({"detail": wanted if isinstance(wanted, str) else since}, 400)
    first = await _authorize_stream(svc, caller, str(thread_id))
    frames = _frames(svc, str(thread_id), wanted, since, first)
    return sse_response(settings.stream_keepalive_seconds, frames)


async def _authorize_stream(svc: SessionServices, caller: Caller, thread_id: str) -> list[Any]:
    """The thread's first runs, once the caller may read it. A client opens its streams as
    it sends `run.start`, which creates the thread: a thread that does not exist yet is
    waited for a moment, then answered 404 (the SDK opens the stream again once its run
    has started)."""
    first = await svc.session.first_runs(thread_id, THREAD_WAIT_SECONDS)
    await require_thread(svc.threads, caller, thread_id, "read")
    return first


async def _frames(
    svc: SessionServices, thread_id: str, wanted: EventFilter, since: int | None, first: list[Any]
) -> AsyncIterator[StreamEvent]:
    try:
        async for event in svc.session.thread_events(thread_id, since, first):
            if wanted.matches(event):
                yield StreamEvent(str(event["seq"]), event["method"], _dumps(event))
    except ResumeGap as gap:
        yield StreamEvent("", "error", _dumps(gap_frame(gap)))


def gap_frame(gap: ResumeGap) -> dict[str, Any]:
    """The unsolicited error frame a stream ends with when its cursor is too old."""
    frame = error_reply(None, "resume_gap", str(gap))
    frame.update(since=gap.since, min_available_seq=gap.min_available_seq)
    return frame


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
