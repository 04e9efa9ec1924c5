"""What a service hands the lifecycle to create a run or a thread: validated, authorized,
sealed (encryption) and with its priority settings decided; the lifecycle alone gives the
rows their status and writes them (runyard/lifecycle/machine.py)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from runyard.domain.priority import PrioritySettings
from runyard.domain.status import MultitaskStrategy
from runyard.domain.thread import ThreadRecord


@dataclass(frozen=True, slots=True)
class NewThread:
    """A thread as it is created, its JSON as stored (sealed where encryption covers it).

    `columns`: further columns it is created with (its time-to-live, priority settings).
    """

    thread_id: str
    metadata: Any
    config: Any = None
    values: Any = None
    interrupts: Any = None
    error: Any = None
    context: Any = None
    columns: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class TargetThread:
    """What a new run takes from the thread it goes on, stored or created with it: its id,
    its metadata as stored, and its priority settings (None while it has none)."""

    thread_id: str
    metadata: Any
    settings: PrioritySettings | None = None

    @classmethod
    def of(cls, thread: ThreadRecord) -> TargetThread:
        """What a new run takes from a stored thread."""
        return cls(thread.thread_id, thread.metadata, thread.settings)


class RunRows(Protocol):
    """Builds the row of a new run (sealed, without its status) on the thread it goes on."""

    async def row(self, thread: TargetThread, scheduled_at: Any) -> dict[str, Any]:
        """The run's row on `thread` (as stored), due at `scheduled_at` (None: now)."""
        ...


@dataclass(frozen=True, slots=True)
class NewRun:
    """A run to create under its thread's multitask strategy (`RunLifecycle.create`)."""

    # The thread the run goes on, as it is created when the run creates it.
    thread: NewThread
    # Stateless, or `if_not_exists="create"`: the run may create its thread.
    creates_thread: bool
    # `if_not_exists="create"`: a thread deleted meanwhile is created again.
    recreates_thread: bool
    strategy: MultitaskStrategy
    after_seconds: float | None
    idempotency_key: str | None
    request_hash: str | None
    # Settings assigned for this run, stored on its thread if the thread has none yet.
    assigned_priority: PrioritySettings | None
    # What an existing thread's metadata gets of the run's graph and assistant.
    graph_metadata: Mapping[str, Any]
    rows: RunRows
