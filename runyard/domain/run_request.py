"""What a run asks for, as its worker reads it: the typed view of a run's stored `kwargs`.

`kwargs` stays the stored JSON column (encryption passes it through whole, the API shows it);
`RunRequest.of(run.kwargs)` reads it once, by name, instead of by key across the code. A
key a run was stored without (an older row) reads as its default.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from runyard.domain.encryption_context import CONTEXT_KEY

DEFAULT_STREAM_MODES = ("values",)


@dataclass(frozen=True, slots=True)
class RunRequest:
    """A run's request: the graph, its input or command, config, context, the checkpoint to
    start from, how to stream, where to pause, durability, and its creator's encryption
    context (`encryption.path`)."""

    graph_id: str
    input: Any = None
    command: Mapping[str, Any] | None = None
    config: Mapping[str, Any] | None = None
    context: Any = None
    checkpoint: Mapping[str, Any] | None = None
    checkpoint_id: str | None = None
    stream_mode: tuple[str, ...] = DEFAULT_STREAM_MODES
    stream_subgraphs: bool = False
    interrupt_before: Any = None
    interrupt_after: Any = None
    durability: str | None = None
    encryption_context: Mapping[str, Any] | None = None

    @classmethod
    def of(cls, kwargs: Mapping[str, Any]) -> RunRequest:
        """The request a run's stored `kwargs` hold."""
        modes = kwargs.get("stream_mode") or DEFAULT_STREAM_MODES
        return cls(
            graph_id=str(kwargs["graph_id"]),
            input=kwargs.get("input"),
            command=kwargs.get("command") or None,
            config=kwargs.get("config") or None,
            context=kwargs.get("context"),
            checkpoint=kwargs.get("checkpoint") or None,
            checkpoint_id=kwargs.get("checkpoint_id") or None,
            stream_mode=(modes,) if isinstance(modes, str) else tuple(modes),
            stream_subgraphs=bool(kwargs.get("stream_subgraphs")),
            interrupt_before=kwargs.get("interrupt_before"),
            interrupt_after=kwargs.get("interrupt_after"),
            durability=kwargs.get("durability"),
            encryption_context=kwargs.get(CONTEXT_KEY) or None,
        )

    @property
    def starting_checkpoint(self) -> tuple[str | None, str | None]:
        """(checkpoint id, namespace) the run starts from; (None, None): the latest."""
        checkpoint = self.checkpoint or {}
        return (
            self.checkpoint_id or checkpoint.get("checkpoint_id"),
            checkpoint.get("checkpoint_ns") or None,
        )
