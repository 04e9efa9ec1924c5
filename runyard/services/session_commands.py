"""The thread streaming session's commands: start a run, answer interrupts, read the tree.

Each command is one use case over the run services: `run.start` and `input.respond` create
an ordinary run (under the thread's multitask strategy) that streams protocol events, so
every other view of the thread sees it too. A refused command raises CommandError, which
the transport answers as an error reply; nothing is written before the checks pass.
"""

from __future__ import annotations

import asyncio
from contextlib import suppress
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from runyard.db import runs as runs_db
from runyard.db import threads as threads_db
from runyard.db.engine import Sessions
from runyard.domain.errors import ConflictError, InvalidInputError, NotFoundError
from runyard.domain.run import RunRecord
from runyard.domain.status import TERMINAL_RUN_STATUSES, MultitaskStrategy, ThreadStatus
from runyard.domain.thread import ThreadRecord
from runyard.encryption.encrypted_json import opened_thread
from runyard.graphs.streaming import PROTOCOL_MODE
from runyard.schemas.runs import RunCreate
from runyard.services.run_waits import RunWaits
from runyard.services.runs import RunService
from runyard.services.thread_session import ThreadSession, graph_name, is_session_run
from runyard.streaming.session_events import RunTranslator

if TYPE_CHECKING:
    from runyard.encryption.custom import CustomEncryption

_STRATEGIES = tuple(MultitaskStrategy)
# How long an answer waits for the interrupted run to finish stopping.
SETTLE_SECONDS = 5.0
SETTLE_POLL_SECONDS = 0.1


class CommandError(Exception):
    """A command refused with one of the protocol's error codes."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True)
class ResumeEntry:
    """One interrupt to answer: its id, the namespace it was raised in, the answer."""

    interrupt_id: str
    namespace: list[str]
    response: Any


def run_body(params: dict[str, Any]) -> RunCreate:
    """The run a `run.start` asks for (the thread is created when the client minted its id)."""
    assistant_id = params.get("assistant_id")
    if not isinstance(assistant_id, str) or not assistant_id:
        raise CommandError("invalid_argument", "run.start requires an assistant_id.")
    strategy = params.get("multitaskStrategy", params.get("multitask_strategy"))
    fields: dict[str, Any] = {
        "assistant_id": assistant_id,
        "input": params.get("input"),
        "config": params.get("config"),
        "context": params.get("context"),
        "metadata": params.get("metadata"),
        "if_not_exists": "create",
    }
    if strategy is not None:
        if strategy not in {name.value for name in _STRATEGIES}:
            raise CommandError(
                "invalid_argument", f"multitaskStrategy must be one of {', '.join(_STRATEGIES)}"
            )
        fields["multitask_strategy"] = strategy
    return _validated(fields)


def _validated(fields: dict[str, Any]) -> RunCreate:
    try:
        return RunCreate.model_validate({k: v for k, v in fields.items() if v is not None})
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "params"
        raise CommandError("invalid_argument", f"{where}: {first['msg']}") from None


def resume_entries(params: dict[str, Any]) -> list[ResumeEntry]:
    """The interrupts an `input.respond` answers: one, or several with `responses`."""
    many = params.get("responses")
    raw = many if isinstance(many, list) else [params]
    if isinstance(many, list) and not many:
        raise CommandError("invalid_argument", "input.respond requires at least one response.")
    entries = []
    for item in raw:
        if not isinstance(item, dict):
            raise CommandError("invalid_argument", "input.respond responses must be objects.")
        interrupt_id = item.get("interrupt_id")
        if not isinstance(interrupt_id, str) or not interrupt_id:
            raise CommandError("invalid_argument", "input.respond requires an interrupt_id.")
        namespace = item.get("namespace", [])
        if not isinstance(namespace, list) or not all(isinstance(s, str) for s in namespace):
            raise CommandError(
                "invalid_argument", "input.respond requires namespace to be a list of strings."
            )
        entries.append(ResumeEntry(interrupt_id, list(namespace), item.get("response")))
    return entries


class SessionCommands:
    """The commands of a thread's streaming session: start a run, resume it, read its agents."""

    def __init__(
        self,
        autocommit: Sessions,
        runs: RunService,
        waits: RunWaits,
        session: ThreadSession,
        encryption: CustomEncryption | None,
    ) -> None:
        self.autocommit = autocommit
        self.runs = runs
        self.waits = waits
        self.session = session
        self.encryption = encryption

    async def start_run(
        self,
        thread_id: str,
        body: RunCreate,
        configurable: dict[str, Any],
        new_thread_metadata: dict[str, Any] | None,
    ) -> RunRecord:
        """Create the session run; refusals (unknown assistant, busy thread) as CommandError."""
        try:
            return await self.runs.create_run(
                thread_id,
                body,
                stream_modes=[PROTOCOL_MODE],
                new_thread_metadata=new_thread_metadata,
                configurable=configurable,
            )
        except NotFoundError as exc:
            raise CommandError("invalid_argument", str(exc)) from None
        except (ConflictError, InvalidInputError) as exc:
            raise CommandError("invalid_argument", str(exc)) from None

    async def resume_body(self, thread_id: str, params: dict[str, Any]) -> RunCreate:
        """The run that answers the interrupts `params` name, once each is pending on the thread.

        It resumes with a map of interrupt id to answer (with `update`/`goto` when given), on
        the assistant of the thread's last run, refused while another run is pending.
        """
        entries = resume_entries(params)
        thread, latest = await self._settled_thread(thread_id)
        if thread is None or latest is None:
            raise CommandError("no_such_run", "No interrupted run is bound to this thread.")
        thread = await opened_thread(self, thread, ("interrupts",))
        pending = {
            item.get("id")
            for items in (thread.interrupts or {}).values()
            for item in items
            if isinstance(item, dict)
        }
        for entry in entries:
            if thread.status != ThreadStatus.INTERRUPTED or entry.interrupt_id not in pending:
                raise CommandError(
                    "no_such_interrupt",
                    f"Unknown or already-consumed interrupt: {entry.interrupt_id} "
                    f"(the thread is {thread.status.value})",
                )
        raised = await self._interrupt_namespaces(latest)
        for entry in entries:
            if entry.interrupt_id in raised and raised[entry.interrupt_id] != entry.namespace:
                raise CommandError(
                    "no_such_interrupt", "Interrupt namespace does not match the pending interrupt."
                )
        command: dict[str, Any] = {"resume": {e.interrupt_id: e.response for e in entries}}
        for key in ("update", "goto"):
            if params.get(key) is not None:
                command[key] = params[key]
        fields = {
            "assistant_id": latest.assistant_id,
            "command": command,
            "config": params.get("config"),
            "metadata": params.get("metadata"),
            "multitask_strategy": MultitaskStrategy.REJECT,
        }
        return _validated(fields)

    async def _settled_thread(self, thread_id: str) -> tuple[ThreadRecord | None, RunRecord | None]:
        """The thread and its latest run, once that run has ended and the thread is no longer
        busy with it: a client answers an interrupt as soon as it streams, a moment before the
        run has finished stopping (bounded by SETTLE_SECONDS)."""
        for _ in range(int(SETTLE_SECONDS / SETTLE_POLL_SECONDS)):
            async with self.autocommit() as session:
                thread = await threads_db.get_thread(session, thread_id)
                latest = await runs_db.latest_run(session, thread_id) if thread else None
            if latest is None or thread is None:
                return thread, latest
            if latest.status in TERMINAL_RUN_STATUSES and thread.status != ThreadStatus.BUSY:
                return thread, latest
            with suppress(TimeoutError, NotFoundError):
                await asyncio.wait_for(
                    self.waits.wait_until_done(thread_id, latest.run_id),
                    SETTLE_POLL_SECONDS,
                )
        return thread, latest

    async def _interrupt_namespaces(self, run: RunRecord) -> dict[str, list[str]]:
        """Where each interrupt of a session run was raised, as its events said."""
        if not is_session_run(run):
            return {}
        translator = RunTranslator(run.run_id, graph_name(run))
        async for _ in self.session.run_protocol_events(run, follow=False, translator=translator):
            pass
        return translator.interrupts

    async def agent_tree(self, thread_id: str) -> dict[str, Any]:
        """The tree of the thread's latest session run: its root and subgraphs, with status."""
        async with self.autocommit() as session:
            latest = await runs_db.latest_run(session, thread_id)
        if latest is None or not is_session_run(latest):
            raise CommandError("no_such_run", "No active run is bound to this thread.")
        run = latest
        translator = RunTranslator(run.run_id, graph_name(run))
        async for _ in self.session.run_protocol_events(run, follow=False, translator=translator):
            pass
        return translator.tree()
