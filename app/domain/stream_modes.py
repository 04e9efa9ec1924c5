"""The stream modes a client may ask for, as LangGraph Platform names them."""

from __future__ import annotations

STREAM_MODES: tuple[str, ...] = (
    "values",
    "updates",
    "messages",
    "messages-tuple",
    "custom",
    "events",
    "debug",
    "tasks",
    "checkpoints",
)
