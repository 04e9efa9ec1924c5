"""The stream modes a client may ask for, as LangGraph Platform names them."""

from __future__ import annotations

from typing import Literal, get_args

StreamModeName = Literal[
    "values",
    "updates",
    "messages",
    "messages-tuple",
    "custom",
    "events",
    "debug",
    "tasks",
    "checkpoints",
    "tools",
    "lifecycle",
]
STREAM_MODES: tuple[str, ...] = get_args(StreamModeName)
