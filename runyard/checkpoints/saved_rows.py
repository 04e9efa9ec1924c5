"""What both checkpoint savers (PostgreSQL and SQLite) write the same way, in the library's
format: a task's pending-write rows, and the config a saved checkpoint answers with."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from langgraph.checkpoint.base import WRITES_IDX_MAP


def saved_config(thread_id: str, checkpoint_ns: str, checkpoint_id: str) -> dict[str, Any]:
    """The config `aput` answers with: the checkpoint just saved."""
    return {
        "configurable": {
            "thread_id": thread_id,
            "checkpoint_ns": checkpoint_ns,
            "checkpoint_id": checkpoint_id,
        }
    }


def write_rows(
    config: Any,
    writes: Sequence[tuple[str, Any]],
    task_id: str,
    task_path: str,
    dumps: Callable[[Any], tuple[str, bytes]],
) -> tuple[bool, list[tuple[Any, ...]]]:
    """The rows of a task's writes (thread, namespace, checkpoint, task, path, index,
    channel, type, blob), and whether every channel is a special one (its rows replace what
    is stored; other writes keep the rows first written)."""
    conf = config["configurable"]
    special = all(channel in WRITES_IDX_MAP for channel, _ in writes)
    head = (
        str(conf["thread_id"]),
        str(conf["checkpoint_ns"]),
        str(conf["checkpoint_id"]),
        task_id,
        task_path,
    )
    rows = [
        (*head, WRITES_IDX_MAP.get(channel, idx), channel, *dumps(value))
        for idx, (channel, value) in enumerate(writes)
    ]
    return special, rows
