"""Run use cases: create (with multitask strategies), read, list, delete, cancel."""

from __future__ import annotations

import hashlib
import json
import logging
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy.exc import IntegrityError

from runyard.db import runs as runs_db
from runyard.db import threads as threads_db
from runyard.db.engine import Sessions
from runyard.db.run_stats import count_pending_in_group
from runyard.domain.encryption_context import CONTEXT_KEY
from runyard.domain.errors import ConflictError, InvalidInputError, NotFoundError, RunEndedError
from runyard.domain.new_run import NewRun
from runyard.domain.run import RunRecord
from runyard.domain.status import TERMINAL_RUN_STATUSES, CancelAction, RunStatus
from runyard.domain.user_bounds import RunBounds, check_batch_size, check_pending_room
from runyard.encryption.encrypted_json import opened_run
from runyard.lifecycle.machine import Created, RunLifecycle, Stopped
from runyard.outbound.guard import WebhookGuard
from runyard.queue.run_queue import RunQueue
from runyard.schemas.runs import RunCreate
from runyard.services.assistants import AssistantService
from runyard.services.new_runs import NewRuns, PendingRunRows, new_id
from runyard.services.run_priority import RunPriorities

if TYPE_CHECKING:
    from runyard.encryption.custom import CustomEncryption

log = logging.getLogger("runyard.runs")


def _check_stateless(body: RunCreate) -> None:
    if body.command is not None and body.command.resume is not None:
        raise InvalidInputError("you must provide a thread_id when resuming an interrupted run")
    if body.checkpoint or body.checkpoint_id:
        raise InvalidInputError("checkpoint and checkpoint_id need a thread_id (stateful run)")


def _request_hash(thread_id: str | None, body: RunCreate) -> str:
    canonical = json.dumps(
        {"thread_id": thread_id, "body": body.model_dump(mode="json")}, sort_keys=True
    )
    return hashlib.sha256(canonical.encode()).hexdigest()


def to_wire(run: RunRecord) -> dict[str, Any]:
    """The Agent Protocol view of a run (its JSON as given: `RunService.opened` first)."""
    return {
        "run_id": run.run_id,
        "thread_id": run.thread_id,
        "assistant_id": run.assistant_id,
        "created_at": run.created_at.isoformat(),
        "updated_at": run.updated_at.isoformat(),
        "status": run.status.value,
        "metadata": run.metadata or {},
        "kwargs": {k: v for k, v in (run.kwargs or {}).items() if k != CONTEXT_KEY},
        "multitask_strategy": run.multitask_strategy,
        "langsmith_session_name": run.langsmith_session_name,
        "held_back": run.held_back,
    }


@dataclass(frozen=True, slots=True)
class RunRequest:
    """What a request asks of a new run, its Idempotency-Key as stored and the hash of the
    request it was sent with."""

    thread_id: str | None
    body: RunCreate
    stream_modes: list[str] | None
    idempotency_key: str | None
    request_hash: str | None


@dataclass(frozen=True, slots=True)
class PendingRun:
    """A run checked and ready to commit, and the fairness group it will wait in."""

    new_run: NewRun
    after_seconds: float | None
    fairness_group: str


class RunService:
    """Run use cases: create under the thread's multitask strategy, read, list, delete, cancel."""

    def __init__(
        self,
        autocommit: Sessions,
        lifecycle: RunLifecycle,
        queue: RunQueue,
        webhook_guard: WebhookGuard,
        heartbeat_interval_seconds: float,
        assistants: AssistantService,
        new_runs: NewRuns,
        priorities: RunPriorities,
        encryption: CustomEncryption | None,
        bounds: RunBounds,
    ) -> None:
        self.autocommit = autocommit
        self.lifecycle = lifecycle
        self.queue = queue
        self.webhook_guard = webhook_guard
        self.heartbeat_interval_seconds = heartbeat_interval_seconds
        self.assistants = assistants
        self.new_runs = new_runs
        self.priorities = priorities
        self.encryption = encryption
        self.bounds = bounds

    async def create_run(
        self,
        thread_id: str | None,
        body: RunCreate,
        *,
        stream_modes: list[str] | None = None,
        idempotency_key: str | None = None,
        new_thread_metadata: dict[str, Any] | None = None,
        on_created: Callable[[str], Awaitable[object]] | None = None,
        configurable: dict[str, Any] | None = None,
    ) -> RunRecord:
        """Validate, apply the thread's multitask strategy, commit a pending run, dispatch it.

        `new_thread_metadata` goes on a thread the run creates (`if_not_exists="create"`).
        `configurable` is what the server adds to the run's `configurable` (the authenticated
        user, chosen request headers); a client cannot set those keys itself.
        `idempotency_key` is the key as stored (scoped to its caller by the API).
        `on_created(run_id)` is awaited between the commit and the dispatch of a new run (not
        for an existing run answered instead): nothing can have executed it yet. The run
        returned has its JSON decrypted (encryption.path)."""
        # Only an Idempotency-Key ever compares requests: hash the body only then.
        request_hash = _request_hash(thread_id, body) if idempotency_key else None
        replay = await self._idempotent_replay(idempotency_key, request_hash)
        if replay is not None:
            return replay
        request = RunRequest(thread_id, body, stream_modes, idempotency_key, request_hash)
        pending = await self._pending_run(request, new_thread_metadata or {}, configurable or {})
        await self._require_room([pending])
        return await self._create(pending, on_created)

    async def _pending_run(
        self,
        request: RunRequest,
        new_thread_metadata: dict[str, Any],
        configurable: dict[str, Any],
    ) -> PendingRun:
        """The run a request asks for, checked and with its priority decided; not written."""
        thread_id, body = request.thread_id, request.body
        assistant = await self.assistants.get_assistant(body.assistant_id)
        stateless = thread_id is None
        if stateless:
            _check_stateless(body)
        if body.webhook is not None:
            await self.webhook_guard.check(body.webhook)
        # Before anything is written: an assign function that fails leaves nothing behind.
        priority = await self.priorities.for_new_run(
            thread_id, body, assistant, new_thread_metadata, configurable
        )
        rows = PendingRunRows(
            self.new_runs,
            body,
            assistant,
            stateless,
            request.stream_modes,
            request.idempotency_key,
            request.request_hash,
            configurable,
            priority,
        )
        new_run = await self.new_runs.build_new_run(
            thread_id or new_id(), body, rows, new_thread_metadata
        )
        return PendingRun(new_run, body.after_seconds, priority.settings.fairness_group)

    async def _create(
        self, pending: PendingRun, on_created: Callable[[str], Awaitable[object]] | None
    ) -> RunRecord:
        """Commit a pending run and dispatch it (or answer the run its key was used for)."""
        new_run = pending.new_run
        try:
            created = await self.lifecycle.create(new_run)
        except IntegrityError:
            # Another instance committed the same Idempotency-Key first: answer with its run.
            replay = await self._idempotent_replay(new_run.idempotency_key, new_run.request_hash)
            if replay is None:
                raise
            return replay
        if created.created:
            await self._dispatch(created, pending.after_seconds, on_created)
        return await self.opened(created.run)

    async def _require_room(self, pending: list[PendingRun]) -> None:
        """QueueFullError when these runs would take a fairness group past
        RUNYARD_MAX_PENDING_RUNS_PER_GROUP; nothing is written then."""
        adding = Counter(run.fairness_group for run in pending)
        limit = self.bounds.pending_runs_per_group
        for group, count in adding.items():
            async with self.autocommit() as session:
                held = await count_pending_in_group(session, group, limit)
            check_pending_room(group, held, count, limit)

    async def _dispatch(
        self,
        created: Created,
        after_seconds: float | None,
        on_created: Callable[[str], Awaitable[object]] | None,
    ) -> None:
        """A new run is committed: what must precede its dispatch, the strategy's effects on
        the thread's other runs, then the push."""
        run = created.run
        if on_created is not None:
            await on_created(run.run_id)
        await self.lifecycle.after_strategy(created.effects)
        await self.queue.push(run.run_id, after_seconds or 0.0, run.priority, run.fairness_group)
        log.info("run_created run_id=%s thread_id=%s", run.run_id, run.thread_id)

    def check_batch_size(self, size: int) -> None:
        """OverBoundError when a batch holds more runs than RUNYARD_MAX_BATCH_RUNS."""
        check_batch_size(size, self.bounds.batch_runs)

    async def create_batch(
        self, bodies: list[RunCreate], configurable: dict[str, Any] | None = None
    ) -> list[RunRecord]:
        """Create one stateless background run per body, in order (each given `configurable`,
        as `create_run`).

        Every body is checked (assistant, stateless-only fields, priority) and the room left
        in its fairness group counted before the first run is created, so a bad payload
        anywhere in the batch, or a batch its groups cannot hold, creates none.
        """
        self.check_batch_size(len(bodies))
        pending = []
        for index, body in enumerate(bodies):
            try:
                request = RunRequest(None, body, None, None, None)
                pending.append(await self._pending_run(request, {}, configurable or {}))
            except NotFoundError as exc:
                raise NotFoundError(f"batch payload {index}: {exc}") from exc
            except InvalidInputError as exc:
                raise InvalidInputError(f"batch payload {index}: {exc}") from exc
        await self._require_room(pending)
        created = [await self._create(run, None) for run in pending]
        log.info("run_batch_created runs=%s", len(created))
        return created

    async def _idempotent_replay(
        self, key: str | None, request_hash: str | None
    ) -> RunRecord | None:
        if not key:
            return None
        async with self.autocommit() as session:
            existing = await runs_db.get_run_by_idempotency_key(session, key)
        if existing is None:
            return None
        if existing.request_hash != request_hash:
            raise ConflictError(
                "this Idempotency-Key was already used with a different request; "
                "use a new key for a new run"
            )
        return await self.opened(existing)

    async def opened(self, run: RunRecord) -> RunRecord:
        """A stored run with its JSON decrypted (encryption.path)."""
        return await opened_run(self, run)

    async def run_wire(self, run: RunRecord) -> dict[str, Any]:
        """`to_wire` of a stored run, its JSON decrypted (encryption.path)."""
        return to_wire(await opened_run(self, run))

    async def get_run(self, thread_id: str | None, run_id: str) -> RunRecord:
        """A run by id as stored, or NotFoundError."""
        async with self.autocommit() as session:
            row = await runs_db.get_run(session, run_id, thread_id)
        if row is None:
            raise NotFoundError(
                f"run {run_id} not found" + (f" in thread {thread_id}" if thread_id else "")
            )
        return row

    async def list_runs(
        self, thread_id: str, limit: int, offset: int, status: str | None
    ) -> list[RunRecord]:
        """A thread's runs, newest first, their JSON decrypted (encryption.path)."""
        async with self.autocommit() as session:
            if await threads_db.get_thread(session, thread_id) is None:
                raise NotFoundError(f"thread {thread_id} not found")
            runs = await runs_db.list_runs(session, thread_id, limit, offset, status)
        return [await self.opened(run) for run in runs]

    async def delete_run(self, thread_id: str, run_id: str) -> None:
        """Delete a run; one still executing is stopped first and records nothing more."""
        await self.lifecycle.delete_run(thread_id, run_id)

    async def cancel_run(
        self, thread_id: str | None, run_id: str, action: CancelAction
    ) -> dict[str, Any]:
        """Record a cancel durably, then deliver it to the executing instance.

        Returns what happened: `stopping_with` is the stop the run ends by (a rollback
        already in flight outranks an interrupt, which then changes nothing); `delivered`
        is False when no executor acknowledged the message at once, and the recorded flag
        then stops the run at its next lease renewal. RunEndedError (409, with the run's
        status) when the run ended before the cancel could act.
        """
        run = await self.get_run(thread_id, run_id)
        if run.status in TERMINAL_RUN_STATUSES:
            raise RunEndedError(
                f"run {run_id} already finished with status '{run.status.value}'; "
                "nothing to cancel",
                run.status.value,
            )
        stopped = await self.lifecycle.cancel(run, action)
        log.info(
            "run_cancel_requested run_id=%s action=%s stopping_with=%s changed=%s delivered=%s",
            run_id,
            action,
            stopped.stopping_with.value,
            stopped.changed,
            stopped.delivered,
        )
        return {
            "run_id": run_id,
            "thread_id": run.thread_id,
            "action": action.value,
            "was": stopped.was.value,
            "stopping_with": stopped.stopping_with.value,
            "delivered": stopped.delivered,
            "detail": self._cancel_detail(action, stopped),
        }

    def _cancel_detail(self, action: CancelAction, stopped: Stopped) -> str:
        """What a cancel's answer says it did, in words."""
        standing = stopped.stopping_with.value
        if stopped.was == RunStatus.PENDING:
            return "the run had not started; it ends interrupted" + (
                " and is deleted" if standing == CancelAction.ROLLBACK else ""
            )
        if not stopped.changed:
            return (
                f"a {standing} is already stopping this run; this {action} changes nothing "
                f"and the run ends as the {standing} asks"
            )
        if stopped.delivered:
            return "the executing instance received the cancel; the run stops now"
        return (
            "the cancel is recorded but no instance acknowledged it yet; it stops the run at "
            f"the executor's next lease renewal (every {self.heartbeat_interval_seconds:g} s) "
            "or, if that instance is gone, when another instance takes the run over"
        )

    async def cancel_many(
        self,
        thread_id: str | None,
        run_ids: list[str] | None,
        status: str | None,
        action: CancelAction,
    ) -> int:
        """Cancel the chosen active runs; returns how many were cancelled."""
        async with self.autocommit() as session:
            rows = await runs_db.find_active_runs(session, thread_id, run_ids, status)
        cancelled = 0
        for active_thread, run_id in rows:
            try:
                await self.cancel_run(active_thread, run_id, action)
                cancelled += 1
            except (ConflictError, NotFoundError):
                continue  # finished meanwhile
        if run_ids and not cancelled and not rows:
            raise NotFoundError("no matching active runs to cancel; check the thread and run ids")
        return cancelled
