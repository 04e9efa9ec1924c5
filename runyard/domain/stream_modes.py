"""The stream modes a client may ask for, as LangGraph Platform names them."""

from __future__ import annotations

from collections.abc import Sequence
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


def event_in_modes(event: str, modes: Sequence[str]) -> bool:
    """Whether a stream event belongs to one of the modes (`error` and `end` always do).

    `values|sub:1` is a subgraph's `values`, `messages/partial` a `messages` event, and
    `messages-tuple` streams under the `messages` name.
    """
    if event in ("error", "end"):
        return True
    base = event.split("|", 1)[0]
    family = base.split("/", 1)[0]
    return base in modes or family in modes or (family == "messages" and "messages-tuple" in modes)
