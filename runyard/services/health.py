"""Liveness and readiness checks: background loops, database, the transport's probes
(Redis), migrations, draining."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from sqlalchemy.ext.asyncio import AsyncEngine

from runyard.db.engine import ping
from runyard.db.schema import SchemaFit, SchemaState, schema_state
from runyard.domain.urls import masked_url

CHECK_TIMEOUT = 2.0
OK = "ok"


class Probe(Protocol):
    """A dependency checked beside the database, named in the reports: what the transport
    connects to (runyard/wiring/transport.py; Redis), none in process."""

    @property
    def name(self) -> str:
        """The report's key (`redis`)."""
        ...

    async def ping(self) -> None:
        """Return when the dependency answers; raise when it does not."""
        ...


class HealthChecks:
    """What the probes report of this instance: its loops, its stores, whether it drains."""

    def __init__(
        self,
        engine: AsyncEngine,
        probes: Sequence[Probe],
        dead_parts: Callable[[], list[str]],
        draining: Callable[[], bool],
    ) -> None:
        self.engine = engine
        self.probes = tuple(probes)
        self.dead_parts = dead_parts
        self.draining = draining

    def liveness(self) -> dict[str, Any]:
        """`status` ok, or failing with the background parts that died named in `dead`."""
        dead = self.dead_parts()
        if not dead:
            return {"status": OK, "loops_alive": True}
        return {
            "status": "failing",
            "loops_alive": False,
            "dead": dead,
            "detail": f"background part(s) stopped: {', '.join(dead)}; restart this instance",
        }

    async def readiness(self) -> dict[str, str]:
        """Each dependency's state: "ok", or what failed in words a person can act on."""
        report: dict[str, str] = {"database": await self._database_state()}
        if report["database"] == OK:
            try:
                async with asyncio.timeout(CHECK_TIMEOUT):
                    state = await schema_state(self.engine)
                report["migrations"] = _schema_report(state)
            except Exception as exc:
                report["migrations"] = f"unknown: {_unreachable(exc)}"
        else:
            report["migrations"] = "unknown: database unreachable"
        for probe in self.probes:
            report[probe.name] = await _probe_state(probe)
        report["draining"] = "draining: not accepting new work" if self.draining() else OK
        return report

    async def dependency_health(self) -> dict[str, str]:
        """`healthy` or `unhealthy` per data dependency (database, the transport's: Redis when
        configured), as LangGraph's server names them in `GET /ok?check_db=1`."""
        states = {"database": await self._database_state()}
        for probe in self.probes:
            states[probe.name] = await _probe_state(probe)
        return {name: "healthy" if state == OK else "unhealthy" for name, state in states.items()}

    async def _database_state(self) -> str:
        try:
            async with asyncio.timeout(CHECK_TIMEOUT):
                await ping(self.engine)
            return OK
        except Exception as exc:
            return _unreachable(exc)


async def _probe_state(probe: Probe) -> str:
    try:
        async with asyncio.timeout(CHECK_TIMEOUT):
            await probe.ping()
        return OK
    except Exception as exc:
        return _unreachable(exc)


def is_ready(report: dict[str, str]) -> bool:
    """True when every check of a readiness report passed."""
    return all(value == OK for value in report.values())


def _schema_report(state: SchemaState) -> str:
    if state.served:
        return OK
    if state.fit in (SchemaFit.EMPTY, SchemaFit.OLDER):
        return "schema is behind; run `runyard migrate`"
    return f"schema is at {state.found}, which this code (at {state.code}) does not serve on"


def _unreachable(exc: BaseException) -> str:
    if isinstance(exc, TimeoutError):
        return f"unreachable: no answer within {CHECK_TIMEOUT:g} s"
    text = masked_url(str(exc).strip())
    reason = text.splitlines()[0][:200] if text else ""
    return f"unreachable: {type(exc).__name__}" + (f": {reason}" if reason else "")


@dataclass(frozen=True)
class InstanceInfo:
    """What GET /info tells of this instance beyond its version."""

    database: str
    queue: str
    instance_id: str
    graph_ids: list[str]
    # The LangSmith project runs are traced to, None when tracing to LangSmith is off.
    langsmith_project: str | None
