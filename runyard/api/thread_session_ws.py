"""The thread streaming session over a WebSocket on `/threads/{id}/stream/events`: commands
in, replies and the events of the connection's subscriptions out, on one connection."""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from typing import Any

from fastapi import WebSocket, WebSocketDisconnect
from starlette.requests import Request

from runyard.api.deps import Access, SessionServices, session_services_of
from runyard.api.thread_session import (
    THREAD_WAIT_SECONDS,
    dispatch,
    error_reply,
    gap_frame,
    parse_command,
    success_reply,
)
from runyard.auth.guards import require_thread
from runyard.auth.handlers import Caller, authenticate
from runyard.auth.user import caller_configurable
from runyard.domain.errors import InvalidInputError, NotFoundError, RunyardError
from runyard.services.thread_session import ResumeGap, ThreadSession
from runyard.streaming.session_events import EventFilter, parse_filter, parse_since

log = logging.getLogger("runyard.session")


class SocketSession:
    """One WebSocket: its subscriptions (each a task streaming the thread's events through
    its filter) and the highest seq it delivered."""

    def __init__(self, events: ThreadSession, websocket: WebSocket, thread_id: str) -> None:
        self._events = events
        self._ws = websocket
        self.thread_id = thread_id
        self._send_lock = asyncio.Lock()
        self._subscriptions: dict[str, tuple[EventFilter, asyncio.Task[None]]] = {}
        # The seq each subscription's reader has passed, and a wake-up when one moves: the
        # frames of all subscriptions go out in the thread's order (see `_turn`).
        self._read: dict[str, int] = {}
        self._moved = asyncio.Event()
        self.seq = 0

    async def send(self, message: dict[str, Any]) -> None:
        """Send one frame (replies and events never interleave)."""
        text = json.dumps(message, ensure_ascii=False, separators=(",", ":"))
        async with self._send_lock:
            await self._ws.send_text(text)

    def subscribe(self, wanted: EventFilter, since: int | None) -> str:
        """Start delivering the thread's events that match, after `since`."""
        subscription_id = str(uuid.uuid4())
        self._subscriptions[subscription_id] = (wanted, self._start(subscription_id, wanted, since))
        return subscription_id

    def _start(
        self, subscription_id: str, wanted: EventFilter, since: int | None
    ) -> asyncio.Task[None]:
        # Its place in the thread counts from now, before its reader first runs.
        self._passed(subscription_id, since or 0)
        return asyncio.create_task(
            self._deliver(subscription_id, wanted, since),
            name=f"session-subscription:{subscription_id}",
        )

    async def unsubscribe(self, subscription_id: str) -> bool:
        """Stop a subscription; False if the connection has none by that id."""
        entry = self._subscriptions.pop(subscription_id, None)
        if entry is None:
            return False
        await _stop(entry[1])
        self._passed(subscription_id, None)  # its reader may never have started
        return True

    async def reconnect(self, since: int | None) -> int:
        """Restart every subscription after `since`; how many were restored."""
        for subscription_id, (wanted, task) in list(self._subscriptions.items()):
            await _stop(task)
            self._subscriptions[subscription_id] = (
                wanted,
                self._start(subscription_id, wanted, since),
            )
        return len(self._subscriptions)

    async def close(self) -> None:
        """Stop every subscription."""
        for _, task in self._subscriptions.values():
            await _stop(task)
        self._subscriptions.clear()

    async def _deliver(self, subscription_id: str, wanted: EventFilter, since: int | None) -> None:
        try:
            # A subscription may come before the `run.start` that creates the thread.
            while True:
                try:
                    first = await self._events.first_runs(self.thread_id, THREAD_WAIT_SECONDS)
                    break
                except NotFoundError:
                    continue
            async for event in self._events.thread_events(self.thread_id, since, first):
                if wanted.matches(event):
                    await self._turn(subscription_id, event["seq"])
                    self.seq = max(self.seq, event["seq"])
                    await self.send(event)
                self._passed(subscription_id, event["seq"])
        except ResumeGap as gap:
            await self.send(gap_frame(gap))
        except (WebSocketDisconnect, RuntimeError):
            return  # the socket closed under us
        except Exception:
            log.exception("session_subscription_failed thread_id=%s", self.thread_id)
            await self.send(error_reply(None, "unknown_error", "the event stream failed"))
        finally:
            self._passed(subscription_id, None)

    async def _turn(self, subscription_id: str, seq: int) -> None:
        """Wait until every other subscription's reader has passed the events before `seq`.

        Each subscription reads the thread on its own and finds a new run when it next
        looks: without this, one could send a run's end before another sent that run's
        first events, and a client stops a run's projections at its end. The reader
        furthest behind never waits, so all of them move on."""
        while any(read < seq - 1 for other, read in self._read.items() if other != subscription_id):
            await self._moved.wait()

    def _passed(self, subscription_id: str, seq: int | None) -> None:
        """Note how far a subscription's reader has got (None: it stopped)."""
        if seq is None:
            self._read.pop(subscription_id, None)
        else:
            self._read[subscription_id] = seq
        if len(self._read) > 1 or seq is None:
            self._moved.set()
            self._moved = asyncio.Event()


async def _stop(task: asyncio.Task[None]) -> None:
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


# Close codes besides 4000 + an HTTP status: a frame that is not text (RFC 6455's
# "unsupported data"; the session speaks JSON text frames).
UNSUPPORTED_DATA = 1003


async def thread_socket(websocket: WebSocket, thread_id: str) -> None:
    """Full-duplex session on one thread: commands in, replies and events out."""
    access: Access = websocket.app.state.access
    svc = session_services_of(websocket.app.state.services)
    await websocket.accept()
    # A browser cannot read the status of a refused upgrade: refusals close with 4000+status.
    request = Request({**websocket.scope, "type": "http", "method": "GET"})
    try:
        thread_id = _thread_id(thread_id)
        caller = await authenticate(access.auth, request)
        await require_thread(svc.threads, caller, thread_id, "read", missing_ok=caller.auth is None)
    except RunyardError as exc:
        await websocket.close(code=4000 + exc.status_code, reason=exc.message[:120])
        return
    configurable = {**access.run_headers.select(request.headers.items())}
    configurable.update(caller_configurable(caller))
    session = SocketSession(svc.session, websocket, thread_id)
    try:
        while True:
            message = await websocket.receive()
            if message["type"] == "websocket.disconnect":
                break
            raw = message.get("text")
            if raw is None:
                await websocket.close(UNSUPPORTED_DATA, "commands are JSON text frames")
                break
            reply = await _handle(svc, caller, configurable, session, raw)
            await session.send(reply)
    except WebSocketDisconnect:
        pass
    except RunyardError as exc:
        await websocket.close(code=4000 + exc.status_code, reason=exc.message[:120])
    finally:
        await session.close()


def _thread_id(raw: str) -> str:
    """The thread id of the path, as a UUID's text; InvalidInputError (4422) if it is none."""
    try:
        return str(uuid.UUID(raw))
    except ValueError:
        raise InvalidInputError(
            f"the thread id {raw[:40]!r} is not a UUID; open /threads/<thread id>/stream/events"
        ) from None


async def _handle(
    svc: SessionServices,
    caller: Caller,
    configurable: dict[str, Any],
    session: SocketSession,
    raw: str,
) -> dict[str, Any]:
    command = parse_command(raw)
    if command.get("type") == "error":
        return command
    command_id, method = command["id"], command["method"]
    params = command.get("params", {})
    if method.startswith("subscription.") and isinstance(params, dict):
        return await _subscription(session, command_id, method, params)
    return await dispatch(svc, caller, configurable, session.thread_id, command, seq=session.seq)


async def _subscription(
    session: SocketSession, command_id: int, method: str, params: dict[str, Any]
) -> dict[str, Any]:
    since = parse_since(params)
    if isinstance(since, str):
        return error_reply(command_id, "invalid_argument", since)
    if method == "subscription.subscribe":
        wanted = parse_filter(params)
        if isinstance(wanted, str):
            return error_reply(command_id, "invalid_argument", wanted)
        subscription_id = session.subscribe(wanted, since)
        return success_reply(
            command_id, {"subscription_id": subscription_id, "replayed_events": 0}, session.seq
        )
    if method == "subscription.unsubscribe":
        unknown = params.get("subscription_id")
        if not isinstance(unknown, str) or not await session.unsubscribe(unknown):
            return error_reply(
                command_id, "no_such_subscription", f"Unknown subscription: {unknown}"
            )
        return success_reply(command_id, {}, session.seq)
    if method == "subscription.reconnect":
        restored = await session.reconnect(since)
        return success_reply(command_id, {"restored": restored > 0}, session.seq)
    return error_reply(command_id, "unknown_command", f"Unknown protocol command: {method}")
