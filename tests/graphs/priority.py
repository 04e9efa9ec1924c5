"""A Priority object as a LangGraph project writes it: the settings come from the run's
metadata, and every call is recorded (one JSON line) in $PRIORITY_CALLS_FILE when set."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from langgraph_sdk import Priority, PriorityContext, PrioritySettings

priority = Priority()


@priority.assign
async def assign(ctx: PriorityContext) -> PrioritySettings | None:
    """`metadata.assign` picks the behaviour: `raise`, `bad` (priority 9), or settings from
    `metadata.priority` and `metadata.group`; without it, the defaults."""
    calls = os.environ.get("PRIORITY_CALLS_FILE")
    if calls:
        seen: dict[str, Any] = {
            "identity": ctx.user.identity,
            "permissions": list(ctx.permissions),
            "thread_id": ctx.thread_id,
            "thread_metadata": ctx.thread_metadata,
            "assistant_id": ctx.assistant_id,
            "graph_id": ctx.graph_id,
            "run_metadata": ctx.run_metadata,
            "cron_id": ctx.cron_id,
        }
        with Path(calls).open("a") as out:  # noqa: ASYNC230 - one short line, a test fixture
            out.write(json.dumps(seen) + "\n")
    how = ctx.run_metadata.get("assign")
    if how == "raise":
        raise RuntimeError("no tier for this customer")
    if how == "bad":
        return {"priority": 9}
    if how is None:
        return None
    return {
        "priority": ctx.run_metadata.get("priority"),
        "fairness_group": ctx.run_metadata.get("group"),
    }
