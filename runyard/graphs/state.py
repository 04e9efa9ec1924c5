"""Converts LangGraph state snapshots into the Agent Protocol's ThreadState shape."""

from __future__ import annotations

from typing import Any

from langgraph.types import StateSnapshot

from runyard.domain.errors import InvalidInputError
from runyard.graphs.serialize import to_jsonable


def checkpoint_ref(config: Any) -> dict[str, Any] | None:
    """The {thread_id, checkpoint_ns, checkpoint_id, checkpoint_map} of a checkpoint config."""
    if not config:
        return None
    conf = config.get("configurable", {})
    return {
        "thread_id": conf.get("thread_id"),
        "checkpoint_ns": conf.get("checkpoint_ns", ""),
        "checkpoint_id": conf.get("checkpoint_id"),
        "checkpoint_map": conf.get("checkpoint_map"),
    }


def snapshot_to_state(snapshot: StateSnapshot) -> dict[str, Any]:
    """The ThreadState dict a client receives for one snapshot (subgraph states nested)."""
    tasks = []
    for task in snapshot.tasks:
        state = snapshot_to_state(task.state) if isinstance(task.state, StateSnapshot) else None
        tasks.append(
            {
                "id": task.id,
                "name": task.name,
                "path": to_jsonable(task.path),
                "error": f"{type(task.error).__name__}({task.error})" if task.error else None,
                "interrupts": to_jsonable(list(task.interrupts)),
                "checkpoint": checkpoint_ref(task.state)
                if task.state is not None and not isinstance(task.state, StateSnapshot)
                else None,
                "state": state,
                "result": to_jsonable(task.result),
            }
        )
    checkpoint = checkpoint_ref(snapshot.config)
    parent = checkpoint_ref(snapshot.parent_config)
    return {
        "values": to_jsonable(snapshot.values),
        "next": list(snapshot.next),
        "tasks": tasks,
        "metadata": to_jsonable(snapshot.metadata or {}),
        "created_at": snapshot.created_at,
        "checkpoint": checkpoint,
        "parent_checkpoint": parent,
        "interrupts": to_jsonable(list(snapshot.interrupts)),
        # Deprecated in the protocol but still read by older clients.
        "checkpoint_id": checkpoint["checkpoint_id"] if checkpoint else None,
        "parent_checkpoint_id": parent["checkpoint_id"] if parent else None,
    }


def empty_state(thread_id: str) -> dict[str, Any]:
    """The state of a thread that has no checkpoint yet."""
    return {
        "values": {},
        "next": [],
        "tasks": [],
        "metadata": {},
        "created_at": None,
        "checkpoint": {
            "thread_id": thread_id,
            "checkpoint_ns": "",
            "checkpoint_id": None,
            "checkpoint_map": None,
        },
        "parent_checkpoint": None,
        "interrupts": [],
        "checkpoint_id": None,
        "parent_checkpoint_id": None,
    }


STATE_FIELDS = (
    "values",
    "next",
    "tasks",
    "checkpoint",
    "metadata",
    "created_at",
    "parent_checkpoint",
    "interrupts",
)


def check_state_select(select: list[str] | None) -> list[str] | None:
    """The `select` of a state read, checked: state fields, or `values.<key>` for one key."""
    if not select:
        return None
    wrong = [
        item
        for item in select
        if item not in STATE_FIELDS and not (item.startswith("values.") and len(item) > 7)
    ]
    if wrong:
        raise InvalidInputError(
            f"unknown state field(s) in select: {wrong}; choose from {', '.join(STATE_FIELDS)} "
            "or values.<key> for one key of the state"
        )
    return select


def select_state(state: dict[str, Any], select: list[str] | None) -> dict[str, Any]:
    """Only the selected fields of a ThreadState; `values.<key>` keeps those keys of values."""
    if not select:
        return state
    out = {field: state[field] for field in STATE_FIELDS if field in select}
    keys = [item[7:] for item in select if item.startswith("values.")]
    if keys and "values" not in out:
        values = state["values"]
        out["values"] = (
            {key: values[key] for key in keys if key in values} if isinstance(values, dict) else {}
        )
    return out
