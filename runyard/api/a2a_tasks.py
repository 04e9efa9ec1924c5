"""A2A tasks of one assistant, carried out by Runyard's run services (one execution path).

A task is a run (its id is the run id) and a context is a thread (its id is the thread id),
so a conversation with the same contextId continues the same thread. The operations Runyard
does not offer are refused in a2a_unoffered.py.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import AsyncGenerator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, NoReturn

from a2a.server.context import ServerCallContext
from a2a.server.events.event_queue import Event
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    SendMessageRequest,
    Task,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatusUpdateEvent,
)
from a2a.utils.errors import (
    A2AError,
    InternalError,
    InvalidParamsError,
    TaskNotCancelableError,
    UnsupportedOperationError,
)

from runyard.api.a2a_unoffered import UnofferedOperations
from runyard.api.deps import RunServices
from runyard.api.errors import STORE_OUTAGE_MESSAGE, is_store_outage
from runyard.api.run_access import authorize_new_run
from runyard.auth.guards import require_assistant, require_thread
from runyard.auth.handlers import Caller
from runyard.domain.assistant import AssistantRecord
from runyard.domain.errors import NotFoundError, RunyardError
from runyard.domain.run import RunRecord
from runyard.domain.status import CancelAction, RunStatus, ThreadStatus
from runyard.schemas import a2a as wire
from runyard.schemas.runs import CommandBody, RunCreate
from runyard.services import run_waits

log = logging.getLogger("runyard.a2a")


@contextmanager
def protocol_errors() -> Iterator[None]:
    """Runyard's errors as A2A errors: a 4xx is the caller's to fix, anything else is ours."""
    try:
        yield
    except A2AError:
        raise
    except Exception as exc:
        _raise_protocol_error(exc)


def _raise_protocol_error(exc: Exception) -> NoReturn:
    if isinstance(exc, RunyardError) and exc.status_code < 500:
        raise InvalidParamsError(message=exc.message) from exc
    if is_store_outage(exc):
        log.warning("a2a_store_unavailable error=%s", type(exc).__name__)
        raise InternalError(message=STORE_OUTAGE_MESSAGE) from exc
    log.exception("a2a_request_failed error=%s", type(exc).__name__)
    raise InternalError(message="internal server error; see the server log") from exc


@dataclass(frozen=True)
class Turn:
    """A message ready to become a run: the thread, the run request, the new thread's owner."""

    thread_id: str
    body: RunCreate
    owner: dict[str, Any] | None


class AssistantTasks(UnofferedOperations):
    """The A2A operations of one assistant for one caller."""

    def __init__(
        self,
        services: RunServices,
        caller: Caller,
        assistant_id: str,
        configurable: dict[str, Any] | None = None,
    ) -> None:
        self.services = services
        self.caller = caller
        self.assistant_ref = assistant_id
        # What the server adds to the `configurable` of the runs (the user, chosen headers).
        self.configurable = configurable or {}
        self._assistant: AssistantRecord | None = None

    async def on_message_send(self, params: SendMessageRequest, context: ServerCallContext) -> Task:
        """Run the assistant on the message's context (thread) and answer with the ended task."""
        with protocol_errors():
            return await self._send(params)

    async def _send(self, params: SendMessageRequest) -> Task:
        turn = await self._turn(params.message)
        if params.configuration.return_immediately:
            # A non-blocking send: the task as submitted; tasks/get follows it.
            run = await self.services.runs.create_run(
                turn.thread_id,
                turn.body,
                new_thread_metadata=turn.owner,
                configurable=self.configurable,
            )
            task_id, context_id = task_id_of(run), run.thread_id
            task = Task(id=task_id, context_id=context_id)
            task.status.CopyFrom(wire.status(TaskState.TASK_STATE_SUBMITTED))
            task.history.append(_stamped(params.message, context_id, task_id))
            return task
        run, output = await self.services.waits.run_to_end(
            turn.thread_id,
            turn.body,
            new_thread_metadata=turn.owner,
            configurable=self.configurable,
        )
        return await self._ended_task(run, output, _history_length(params))

    async def on_message_send_stream(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event]:
        """Run the assistant and stream the task: submitted, working (with the reply as it
        grows), the answer as an artifact, and the final status."""
        with protocol_errors():
            turn = await self._turn(params.message)
            body = turn.body.model_copy(update={"stream_mode": ["values", "messages"]})
            run = await self.services.runs.create_run(
                turn.thread_id,
                body,
                new_thread_metadata=turn.owner,
                configurable=self.configurable,
            )
        task_id, context_id = task_id_of(run), run.thread_id
        first = Task(id=task_id, context_id=context_id)
        first.status.CopyFrom(wire.status(TaskState.TASK_STATE_SUBMITTED))
        first.history.append(_stamped(params.message, context_id, task_id))
        yield first
        yield TaskStatusUpdateEvent(
            task_id=task_id, context_id=context_id, status=wire.status(TaskState.TASK_STATE_WORKING)
        )
        with protocol_errors():
            async for event in self._followed(run, task_id, context_id):
                yield event

    async def _followed(
        self, run: RunRecord, task_id: str, context_id: str
    ) -> AsyncGenerator[Event]:
        """The run's reply as it grows, then its answer and its final status."""
        result = run_waits.RunResult()
        events = self.services.waits.run_events(run, None, None, cancel_on_disconnect=False)
        async for event in events:
            result.absorb(event)
            for text in _partial_replies(event.event, event.data):
                message = wire.agent_message(text, context_id, task_id)
                yield TaskStatusUpdateEvent(
                    task_id=task_id,
                    context_id=context_id,
                    status=wire.status(TaskState.TASK_STATE_WORKING, message),
                )
        ended_run = await self._run(run.run_id)
        output = result.body()
        if output is None:
            output = await self.services.waits.result_body(ended_run)
        ended = await self._ended_task(ended_run, output, 0)
        for artifact in ended.artifacts:
            yield TaskArtifactUpdateEvent(
                task_id=task_id, context_id=context_id, artifact=artifact, last_chunk=True
            )
        yield TaskStatusUpdateEvent(task_id=task_id, context_id=context_id, status=ended.status)

    async def on_get_task(self, params: GetTaskRequest, context: ServerCallContext) -> Task | None:
        """The task's current state, its history and, once it has ended, its answer."""
        with protocol_errors():
            return await self._get(params)

    async def _get(self, params: GetTaskRequest) -> Task | None:
        run = await self._task_run(params.id, "read")
        if run is None:
            return None
        length = params.history_length if params.HasField("history_length") else None
        if wire.STATE_OF_RUN.get(run.status) in wire.TERMINAL_STATES:
            return await self._ended_task(run, await self.services.waits.result_body(run), length)
        task_id = task_id_of(run)
        task = Task(id=task_id, context_id=run.thread_id)
        task.status.CopyFrom(wire.status(wire.STATE_OF_RUN[run.status]))
        task.history.extend(
            wire.history(await self._thread_messages(run), run.thread_id, task_id, length)
        )
        return task

    async def on_cancel_task(
        self, params: CancelTaskRequest, context: ServerCallContext
    ) -> Task | None:
        """Cancel the task's run wherever it executes, and answer once it has stopped."""
        with protocol_errors():
            return await self._cancel(params)

    async def _cancel(self, params: CancelTaskRequest) -> Task | None:
        run = await self._task_run(params.id, "update")
        if run is None:
            return None
        state = wire.STATE_OF_RUN.get(run.status)
        if state in wire.TERMINAL_STATES:
            raise TaskNotCancelableError(
                message=f"task {params.id} has already ended ({run.status}); nothing to cancel"
            )
        await self.services.runs.cancel_run(run.thread_id, run.run_id, CancelAction.INTERRUPT)
        await self.services.waits.wait_until_done_or_gone(run.run_id)
        task = Task(id=params.id, context_id=run.thread_id)
        message = wire.agent_message("Task was canceled", run.thread_id, params.id)
        task.status.CopyFrom(wire.status(TaskState.TASK_STATE_CANCELED, message))
        return task

    async def _assistant_row(self) -> AssistantRecord:
        if self._assistant is None:
            try:
                await require_assistant(
                    self.services.assistants, self.caller, self.assistant_ref, "read"
                )
                self._assistant = await self.services.assistants.get_assistant(self.assistant_ref)
            except NotFoundError as exc:
                raise InvalidParamsError(
                    message=f"{exc.message}; /assistants/search lists the assistants you can use"
                ) from exc
        return self._assistant

    async def _turn(self, message: Message) -> Turn:
        """Check the message and build the run that answers it."""
        assistant = await self._assistant_row()
        if message.context_id:
            try:
                thread_id = str(uuid.UUID(message.context_id))
            except ValueError:
                raise InvalidParamsError(
                    message=f"contextId {message.context_id!r} is not one this agent gave: "
                    "contexts are thread ids (UUIDs); omit it to start a new conversation"
                ) from None
        else:
            thread_id = str(uuid.uuid4())
        metadata = {"a2a": {"message_id": message.message_id}}
        if message.task_id:
            command = await self._resume_command(message, thread_id)
            # The answering run continues the same task.
            metadata["a2a"]["task_id"] = message.task_id
            body = RunCreate(
                assistant_id=assistant.assistant_id, command=command, metadata=metadata
            )
        else:
            schemas = await self.services.assistants.get_schemas(assistant.assistant_id)
            fields = sorted((schemas.get("input_schema") or {}).get("properties") or {})
            body = RunCreate(
                assistant_id=assistant.assistant_id,
                input=wire.graph_input(message, fields),
                metadata=metadata,
                if_not_exists="create",
            )
        owner = await authorize_new_run(
            self.services.threads, self.services.assistants, self.caller, thread_id, body
        )
        return Turn(thread_id, body, owner)

    async def _resume_command(self, message: Message, thread_id: str) -> CommandBody:
        """A message naming a task answers that task's pending interrupt."""
        run = await self._task_run(message.task_id, "update")
        if run is None or (message.context_id and run.thread_id != thread_id):
            raise InvalidParamsError(
                message=f"task {message.task_id} not found in this context; omit taskId to "
                "start a new task (the same contextId continues the conversation)"
            )
        thread = await self.services.threads.get_thread(run.thread_id)
        if run.status != RunStatus.SUCCESS or thread.status != ThreadStatus.INTERRUPTED:
            raise UnsupportedOperationError(
                message=f"task {message.task_id} does not wait for input (its run is "
                f"{run.status}); send the message without taskId to start a new task"
            )
        return CommandBody(resume=wire.resume_value(message))

    async def _task_run(self, task_id: str, action: str) -> RunRecord | None:
        """The latest run of a task of this assistant that the caller may `action`, or None.

        A task starts as the run its id names; each answer to its interrupts is a later run
        on the same thread whose metadata names the task.
        """
        assistant = await self._assistant_row()
        try:
            run = await self.services.runs.get_run(None, str(uuid.UUID(task_id)))
            # A task on a thread the caller may not see does not exist for them.
            await require_thread(self.services.threads, self.caller, run.thread_id, action)
        except (ValueError, NotFoundError):
            return None
        if run.assistant_id != assistant.assistant_id or task_id_of(run) != task_id:
            return None
        newest = await self.services.runs.list_runs(run.thread_id, 100, 0, None)
        later = [r for r in newest if task_id_of(r) == task_id]
        return await self._run(later[0].run_id) if later else run

    async def _run(self, run_id: str) -> RunRecord:
        return await self.services.runs.get_run(None, run_id)

    async def _thread_messages(self, run: RunRecord) -> list[Any]:
        try:
            thread = await self.services.threads.get_thread(run.thread_id)
        except NotFoundError:
            return []
        values = thread.values or {}
        messages = values.get("messages") if isinstance(values, dict) else None
        return messages if isinstance(messages, list) else []

    async def _ended_task(self, run: RunRecord, output: Any, length: int | None) -> Task:
        """The task of a run that has ended; a graph's interrupt makes it input-required."""
        messages = output.get("messages") if isinstance(output, dict) else None
        if not isinstance(messages, list):
            messages = await self._thread_messages(run)
        task_id = task_id_of(run)
        if run.status == RunStatus.INTERRUPTED:
            task = Task(id=task_id, context_id=run.thread_id)
            task.status.CopyFrom(wire.status(TaskState.TASK_STATE_CANCELED))
            task.history.extend(wire.history(messages, run.thread_id, task_id, length))
            return task
        return wire.finished_task(
            task_id, run.thread_id, run.assistant_id, output, messages, length
        )


def task_id_of(run: RunRecord) -> str:
    """The task a run belongs to: the one its metadata names (an answer), else its own."""
    a2a = (run.metadata or {}).get("a2a")
    named = a2a.get("task_id") if isinstance(a2a, dict) else None
    return str(named or run.run_id)


def _history_length(params: SendMessageRequest) -> int | None:
    config = params.configuration
    return config.history_length if config.HasField("history_length") else None


def _stamped(message: Message, context_id: str, task_id: str) -> Message:
    stamped = Message()
    stamped.CopyFrom(message)
    stamped.context_id = context_id
    stamped.task_id = task_id
    return stamped


def _partial_replies(event: str, data: str) -> list[str]:
    """The agent's reply so far, from a `messages/partial` event."""
    if event != "messages/partial":
        return []
    items = json.loads(data)
    return [
        text
        for item in items
        if isinstance(item, dict)
        and wire.ROLE_OF_TYPE.get(str(item.get("type"))) == wire.Role.ROLE_AGENT
        and (text := wire.content_text(item.get("content")))
    ]
