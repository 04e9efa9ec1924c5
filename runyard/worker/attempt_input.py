"""What a run's attempt gives its graph: the config, and the input or resume."""

from __future__ import annotations

import copy
import logging
import uuid
from collections.abc import Mapping
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.types import Command, Send

from runyard.domain.configurable import AUTH_USER_KEY
from runyard.domain.run import RunRecord
from runyard.domain.user import user_from_config

log = logging.getLogger("runyard.worker")


def attempt_config(run: RunRecord, recursion_limit: int | None = None) -> dict[str, Any]:
    """The graph config of the run's attempt: the run's own config, the caller's identity,
    the ids LangGraph and the graph read, the checkpoint asked for, and run metadata;
    `recursion_limit` (LANGGRAPH_DEFAULT_RECURSION_LIMIT) where the run's config sets none."""
    request = run.request
    config: dict[str, Any] = copy.deepcopy(dict(request.config or {}))
    if recursion_limit is not None:
        config.setdefault("recursion_limit", recursion_limit)
    configurable = config.setdefault("configurable", {})
    user = user_from_config(configurable)
    if user is not None:
        configurable[AUTH_USER_KEY] = user
    configurable.update(
        thread_id=run.thread_id,
        run_id=run.run_id,
        assistant_id=run.assistant_id,
        graph_id=request.graph_id,
    )
    checkpoint_id, checkpoint_ns = request.starting_checkpoint
    if checkpoint_id:
        configurable["checkpoint_id"] = checkpoint_id
    if checkpoint_ns:
        configurable["checkpoint_ns"] = checkpoint_ns
    config["metadata"] = {
        **(config.get("metadata") or {}),
        **(run.metadata or {}),
        "run_id": run.run_id,
        "thread_id": run.thread_id,
        "assistant_id": run.assistant_id,
        "graph_id": request.graph_id,
        "run_attempt": run.attempt,
    }
    if run.attempt == 1:
        config["run_id"] = uuid.UUID(run.run_id)
    return config


async def attempt_input(
    checkpointer: BaseCheckpointSaver, run: RunRecord, config: dict[str, Any]
) -> Any:
    """The graph input; a retried run resumes from its own last checkpoint instead."""
    request = run.request
    if run.attempt > 1:
        latest = await checkpointer.aget_tuple(
            {"configurable": {"thread_id": run.thread_id, "checkpoint_ns": ""}}
        )
        if latest is not None and (latest.metadata or {}).get("run_id") == run.run_id:
            config["configurable"].pop("checkpoint_id", None)
            log.info("run_resumed run_id=%s attempt=%s", run.run_id, run.attempt)
            return None
    if request.command:
        return to_command(request.command)
    return request.input


def to_command(raw: Mapping[str, Any]) -> Command[Any]:
    """The LangGraph Command of a run's `command` (resume, update, goto with Send)."""
    goto = raw.get("goto")
    if isinstance(goto, dict):
        goto = Send(goto["node"], goto.get("input"))
    elif isinstance(goto, list):
        goto = [Send(g["node"], g.get("input")) if isinstance(g, dict) else g for g in goto]
    args: dict[str, Any] = {}
    if "resume" in raw:
        args["resume"] = raw["resume"]
    if raw.get("update") is not None:
        update = raw["update"]
        args["update"] = [tuple(u) for u in update] if isinstance(update, list) else update
    if goto is not None:
        args["goto"] = goto
    return Command(**args)
