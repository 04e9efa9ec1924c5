"""The SSE text of an event, made once when many streams send the same event."""

from __future__ import annotations

import re
from dataclasses import dataclass

from runyard.streaming.broker import StreamEvent

_LINE_BREAK = re.compile(r"\r\n|\r|\n")


@dataclass(frozen=True)
class FramedEvent(StreamEvent):
    """An event with its SSE text already made (shared by every stream that sends it)."""

    frame: str = ""


def sse_frame(event: StreamEvent) -> str:
    """The SSE text of one event: its id (when it has one), name and data lines (one per
    line of the data), CRLF-separated."""
    if isinstance(event, FramedEvent):
        return event.frame
    head = f"id: {_LINE_BREAK.sub('', event.id)}\r\n" if event.id else ""
    name = _LINE_BREAK.sub("", event.event)
    data = event.data
    if "\n" in data or "\r" in data:
        lines = "".join(f"data: {line}\r\n" for line in _LINE_BREAK.split(data))
    else:
        lines = f"data: {data}\r\n"
    return f"{head}event: {name}\r\n{lines}\r\n"


def framed(event: StreamEvent) -> FramedEvent:
    """The event with its SSE text made now."""
    return FramedEvent(event.id, event.event, event.data, sse_frame(event))
