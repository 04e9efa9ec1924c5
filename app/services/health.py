"""Readiness checks: database, Redis, migrations, draining."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from sqlalchemy import text

from app.db.engine import current_revision_is_head

if TYPE_CHECKING:
    from app.runtime import Runtime

CHECK_TIMEOUT = 2.0


async def readiness(runtime: Runtime) -> dict[str, str]:
    """Each dependency's state: "ok" or what failed."""
    report: dict[str, str] = {}
    try:
        async with asyncio.timeout(CHECK_TIMEOUT):
            async with runtime.engine.connect() as conn:
                await conn.execute(text("SELECT 1"))
            report["migrations"] = (
                "ok"
                if await current_revision_is_head(runtime.engine)
                else ("database schema is behind; run `runyard migrate`")
            )
        report["database"] = "ok"
    except Exception as exc:
        report["database"] = f"unreachable: {type(exc).__name__}"
    if runtime.redis is not None:
        try:
            async with asyncio.timeout(CHECK_TIMEOUT):
                await runtime.redis.ping()
            report["redis"] = "ok"
        except Exception as exc:
            report["redis"] = f"unreachable: {type(exc).__name__}"
    report["draining"] = "no" if not runtime.draining else "draining: not accepting new work"
    if not runtime.draining:
        report["draining"] = "ok"
    return report
