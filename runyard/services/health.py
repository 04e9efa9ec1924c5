"""Liveness and readiness checks: background loops, database, Redis, migrations, draining."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from runyard.db.engine import ping, schema_is_current
from runyard.domain.urls import masked_url

if TYPE_CHECKING:
    from runyard.runtime import Runtime

CHECK_TIMEOUT = 2.0
OK = "ok"


def liveness(runtime: Runtime) -> dict[str, Any]:
    """`status` ok, or failing with the background parts that died named in `dead`."""
    dead = runtime.dead_parts()
    if not dead:
        return {"status": OK, "loops_alive": True}
    return {
        "status": "failing",
        "loops_alive": False,
        "dead": dead,
        "detail": f"background part(s) stopped: {', '.join(dead)}; restart this instance",
    }


async def readiness(runtime: Runtime) -> dict[str, str]:
    """Each dependency's state: "ok", or what failed in words a person can act on."""
    report: dict[str, str] = {"database": await _database_state(runtime)}
    if report["database"] == OK:
        try:
            async with asyncio.timeout(CHECK_TIMEOUT):
                current = await schema_is_current(runtime.engine)
            report["migrations"] = OK if current else "schema is behind; run `runyard migrate`"
        except Exception as exc:
            report["migrations"] = f"unknown: {_unreachable(exc)}"
    else:
        report["migrations"] = "unknown: database unreachable"
    if runtime.redis is not None:
        report["redis"] = await _redis_state(runtime)
    report["draining"] = "draining: not accepting new work" if runtime.draining else OK
    return report


async def dependency_health(runtime: Runtime) -> dict[str, str]:
    """`healthy` or `unhealthy` per data dependency (database, Redis when configured), as
    LangGraph's server names them in `GET /ok?check_db=1`."""
    states = {"database": await _database_state(runtime)}
    if runtime.redis is not None:
        states["redis"] = await _redis_state(runtime)
    return {name: "healthy" if state == OK else "unhealthy" for name, state in states.items()}


async def _database_state(runtime: Runtime) -> str:
    try:
        async with asyncio.timeout(CHECK_TIMEOUT):
            await ping(runtime.engine)
        return OK
    except Exception as exc:
        return _unreachable(exc)


async def _redis_state(runtime: Runtime) -> str:
    assert runtime.redis is not None
    try:
        async with asyncio.timeout(CHECK_TIMEOUT):
            await runtime.redis.ping()
        return OK
    except Exception as exc:
        return _unreachable(exc)


def is_ready(report: dict[str, str]) -> bool:
    """True when every check of a readiness report passed."""
    return all(value == OK for value in report.values())


def _unreachable(exc: BaseException) -> str:
    if isinstance(exc, TimeoutError):
        return f"unreachable: no answer within {CHECK_TIMEOUT:g} s"
    text = masked_url(str(exc).strip())
    reason = text.splitlines()[0][:200] if text else ""
    return f"unreachable: {type(exc).__name__}" + (f": {reason}" if reason else "")
