"""A run as stored: one frozen record, built once in `db/` from its row and read by
attribute everywhere above. JSON columns stay plain values; the API turns a record into
the Agent Protocol's JSON at its edge (`services/runs.py:to_wire`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar

from runyard.domain.run_request import RunRequest
from runyard.domain.status import CancelAction, MultitaskStrategy, RunStatus
from runyard.domain.stored import StoredRow, column_names


def _stop_of(value: str | None) -> CancelAction | None:
    return CancelAction(value) if value else None


def deletes_thread(temporary: bool, on_completion: str | None) -> bool:
    """Whether a run's thread goes with it once it ends: a stateless run's, unless it was
    created with `on_completion="keep"`."""
    return temporary and (on_completion or "delete") == "delete"


@dataclass(frozen=True, slots=True)
class RunRecord(StoredRow):
    """One row of `runs` (runyard/db/tables.py), column for column."""

    run_id: str
    thread_id: str
    assistant_id: str
    status: RunStatus
    metadata: Any
    # Everything an attempt needs: input, command, config, context, stream modes...
    kwargs: Any
    multitask_strategy: MultitaskStrategy
    created_at: datetime
    updated_at: datetime
    scheduled_at: datetime | None
    started_at: datetime | None
    ended_at: datetime | None
    # Who holds the run, until when, and under which attempt (the fence).
    owner: str | None
    lease_expires_at: datetime | None
    attempt: int
    handovers: int
    # The strongest stop asked of the run while it runs (runyard/lifecycle/stops.py).
    cancel_action: CancelAction | None
    output: Any
    error: Any
    idempotency_key: str | None
    request_hash: str | None
    webhook: str | None
    on_completion: str | None
    temporary: bool
    langsmith_session_name: str | None
    priority: int
    fairness_group: str
    held_back: str | None
    # The instance that last claimed it, kept after it ends (the console's charts).
    last_owner: str | None

    TYPED_COLUMNS: ClassVar[Mapping[str, Callable[[Any], Any]]] = {
        "status": RunStatus,
        "multitask_strategy": MultitaskStrategy,
        "cancel_action": _stop_of,
    }
    JSON_COLUMNS: ClassVar[tuple[str, ...]] = ("metadata", "kwargs", "output", "error")

    @property
    def request(self) -> RunRequest:
        """What the run asks for: its `kwargs`, read by name."""
        return RunRequest.of(self.kwargs)

    @property
    def deletes_thread(self) -> bool:
        """A stateless run whose thread goes with it once it ends."""
        return deletes_thread(self.temporary, self.on_completion)


@dataclass(frozen=True, slots=True)
class ClaimedRun:
    """A run an attempt has just claimed, with what the claim learned of its thread."""

    run: RunRecord
    # False: the thread had no checkpoint at the claim (nothing to read back); None: unknown.
    thread_has_checkpoint: bool | None = None

    @property
    def thread_empty(self) -> bool:
        """A first attempt on a thread without checkpoints: nothing to read back."""
        return self.thread_has_checkpoint is False and self.run.attempt == 1


@dataclass(frozen=True, slots=True)
class UnreadRun(StoredRow):
    """A run ended without reading its JSON columns (they may be what could not be read:
    a run whose data cannot be decrypted): what its end and its webhook need."""

    run_id: str
    thread_id: str
    assistant_id: str
    multitask_strategy: MultitaskStrategy
    created_at: datetime
    updated_at: datetime
    temporary: bool
    on_completion: str | None
    webhook: str | None
    fairness_group: str

    TYPED_COLUMNS: ClassVar[Mapping[str, Callable[[Any], Any]]] = {
        "multitask_strategy": MultitaskStrategy
    }

    @property
    def deletes_thread(self) -> bool:
        """A stateless run whose thread goes with it once it ends."""
        return deletes_thread(self.temporary, self.on_completion)


UNREAD_COLUMNS = column_names(UnreadRun)


@dataclass(frozen=True, slots=True)
class RunPlace:
    """Where a pending run goes in the queue: its priority and fairness group, and when it
    is due (None: now, or not read)."""

    run_id: str
    priority: int
    fairness_group: str
    scheduled_at: datetime | None = None

    @classmethod
    def from_row(cls, row: Mapping[Any, Any]) -> RunPlace:
        return cls(
            str(row["run_id"]),
            int(row["priority"]),
            str(row["fairness_group"]),
            row.get("scheduled_at"),
        )


@dataclass(frozen=True, slots=True)
class Recovered:
    """What one round of lease recovery did: the runs it ended (cancelled, or out of
    retries), whole, and the places of those it put back to pending."""

    ended: list[RunRecord]
    requeued: list[RunPlace]

    def __len__(self) -> int:
        return len(self.ended) + len(self.requeued)


# What `RunEndings.end` and a webhook's payload are built from.
EndedRun = RunRecord | UnreadRun


def run_or_none(row: Mapping[Any, Any] | None) -> RunRecord | None:
    """`RunRecord.from_row`, passing None through."""
    return None if row is None else RunRecord.from_row(row)
