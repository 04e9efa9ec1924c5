"""What every transport backend is opened with and brings back (runyard/wiring/transport.py
keeps the registry of backends, keyed by kind)."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass

from runyard.db.engine import Sessions
from runyard.domain.group_caps import GroupCaps
from runyard.loops import LoopGroup
from runyard.queue.cancel_bus import CancelBus, CancelHandler
from runyard.queue.run_queue import RunQueue
from runyard.services.health import Probe
from runyard.settings import Settings
from runyard.streaming.broker import EventBroker


@dataclass(frozen=True)
class TransportNeeds:
    """What a backend is opened with: the settings, the stack its connections close on (the
    close-transport phase), a maker of loop groups stopped in that phase before it (made
    after the connections their loops read), the handler that stops a run executing here,
    the database sessions (a fallback queue reads pending runs), the instance and the caps
    of fairness groups."""

    settings: Settings
    stack: AsyncExitStack
    loop_group: Callable[[str, float], LoopGroup]
    stop_run: CancelHandler
    sessions: Sessions
    instance_id: str
    caps: GroupCaps


@dataclass(frozen=True)
class Transport:
    """What a backend brings: the broker, the run queue and the cancel bus; the probes of what
    it connects to (readiness: /readyz, /ok?check_db=1); whether instances share it (a
    fleet: runs claimed by one may be resumed by another); and the errors of its client that
    mean what it connects to is out of reach (answered 503 "retry shortly", not 500)."""

    broker: EventBroker
    queue: RunQueue
    cancel_bus: CancelBus
    probes: tuple[Probe, ...] = ()
    shared: bool = False
    outage_errors: tuple[type[BaseException], ...] = ()
