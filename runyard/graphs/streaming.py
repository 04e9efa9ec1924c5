"""Runs a graph and turns LangGraph's stream into Agent Protocol (SSE event, payload) pairs."""

from __future__ import annotations

import warnings
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import BaseMessage, BaseMessageChunk, message_chunk_to_message
from langgraph.pregel import Pregel

from runyard.graphs.context import run_context
from runyard.graphs.serialize import to_jsonable

# LangGraph's own modes, passed through; `tools` (tool calls starting, streaming, ending) and
# `lifecycle` are forwarded as LangGraph emits them, as LangGraph Platform does.
_NATIVE = {"values", "updates", "custom", "debug", "tasks", "checkpoints", "tools", "lifecycle"}


_UNSEEN = object()

# The internal stream mode of runs the thread streaming session starts: the graph streams
# LangGraph's protocol events (`astream_events(version="v3")`), one log entry per event.
PROTOCOL_MODE = "protocol"
# The last entry of such a run's log when its graph returned (or stopped at an interrupt).
PROTOCOL_END = "protocol_end"


@dataclass
class FinalState:
    """What the root graph's stream said last: its values, and whether it was interrupted.

    `values` are the graph's state values as `aget_state` would read them afterwards (both
    read the graph's stream channels), so a run that ended cleanly needs no checkpoint read.
    """

    values: Any = _UNSEEN
    interrupted: bool = False

    @property
    def seen(self) -> bool:
        """True once the root graph emitted its values at least once."""
        return self.values is not _UNSEEN

    def absorb(self, mode: str, payload: Any) -> None:
        """Take one root-graph chunk into account."""
        if mode == "values":
            self.values = payload
        elif mode == "updates" and isinstance(payload, dict) and "__interrupt__" in payload:
            # Dynamic interrupts carry their payloads; breakpoints an empty tuple.
            self.interrupted = True


def graph_stream_modes(requested: list[str]) -> list[str]:
    """The LangGraph stream modes needed to serve the requested protocol modes."""
    modes = {m for m in requested if m in _NATIVE}
    if "messages" in requested or "messages-tuple" in requested:
        modes.add("messages")
    # Interrupts surface through updates even when the client did not ask for them, and
    # the final values become the thread's values.
    modes.update(("updates", "values"))
    return sorted(modes)


class MessageAccumulator:
    """Builds `messages/*` events from LangGraph message chunks, as LangGraph Platform does."""

    def __init__(self) -> None:
        self._messages: dict[str, Any] = {}

    def events(self, payload: Any) -> list[tuple[str, Any]]:
        """The events one (message, metadata) pair produces."""
        message, metadata = payload
        if not isinstance(message, BaseMessage):
            return [("messages/complete", [to_jsonable(message)])]
        out: list[tuple[str, Any]] = []
        key = message.id or str(id(message))
        if key in self._messages:
            self._messages[key] = self._messages[key] + message
        else:
            self._messages[key] = message
            out.append(("messages/metadata", {key: {"metadata": to_jsonable(metadata)}}))
        merged = self._messages[key]
        whole = message_chunk_to_message(merged) if isinstance(merged, BaseMessageChunk) else merged
        name = "messages/partial" if isinstance(message, BaseMessageChunk) else "messages/complete"
        out.append((name, [to_jsonable(whole)]))
        return out


def _event_name(mode: str, namespace: tuple[str, ...]) -> str:
    return f"{mode}|{'|'.join(namespace)}" if namespace else mode


def _protocol_events(
    requested: list[str],
    namespace: tuple[str, ...],
    mode: str,
    payload: Any,
    accumulator: MessageAccumulator,
) -> list[tuple[str, Any]]:
    if mode == "messages":
        out: list[tuple[str, Any]] = []
        if "messages-tuple" in requested:
            message, metadata = payload
            out.append((_event_name("messages", namespace), [message, metadata]))
        if "messages" in requested:
            out.extend(
                (_event_name(name, namespace), data) for name, data in accumulator.events(payload)
            )
        return out
    if mode in requested:
        return [(_event_name(mode, namespace), payload)]
    if (
        mode == "updates"
        and "values" not in requested
        and isinstance(payload, dict)
        and payload.get("__interrupt__")
    ):
        # Clients that asked for neither values nor updates still learn of the interrupt.
        return [(_event_name("values", namespace), payload)]
    return []


async def stream_graph(
    graph: Pregel,
    graph_input: Any,
    config: dict[str, Any],
    requested: list[str],
    *,
    subgraphs: bool,
    context: Mapping[str, Any] | None = None,
    interrupt_before: Any = None,
    interrupt_after: Any = None,
    durability: str | None = None,
    final: FinalState | None = None,
) -> AsyncIterator[tuple[str, Any]]:
    """Execute the graph, yielding protocol (event name, JSON-able payload) pairs.

    `context` holds the run's context values; the graph gets them as its `context_schema`
    (with its defaults). `final`, when given, follows the root graph's last values and
    interrupts.
    """
    kwargs = _stream_options(
        graph, requested, context, interrupt_before, interrupt_after, durability
    )
    if PROTOCOL_MODE in requested:
        async for item in _stream_protocol(graph, graph_input, config, kwargs, final):
            yield item
        return
    accumulator = MessageAccumulator()

    def convert(chunk: Any) -> list[tuple[str, Any]]:
        namespace, mode, payload = chunk
        if not namespace and final is not None:
            final.absorb(mode, payload)
        if namespace and not subgraphs:
            return []
        return [
            (name, to_jsonable(data))
            for name, data in _protocol_events(
                requested, tuple(namespace), mode, payload, accumulator
            )
        ]

    if "events" not in requested:
        async for chunk in graph.astream(graph_input, config, **kwargs):  # type: ignore[call-overload]
            for item in convert(chunk):
                yield item
        return
    async for item in _stream_events(graph, graph_input, config, kwargs, convert):
        yield item


def _stream_options(
    graph: Pregel,
    requested: list[str],
    context: Mapping[str, Any] | None,
    interrupt_before: Any,
    interrupt_after: Any,
    durability: str | None,
) -> dict[str, Any]:
    """The keyword arguments of the graph's stream for a run asking for `requested`."""
    kwargs: dict[str, Any] = {
        "stream_mode": graph_stream_modes(requested),
        "subgraphs": True,
        "interrupt_before": interrupt_before,
        "interrupt_after": interrupt_after,
    }
    graph_context = run_context(graph, context)
    if graph_context is not None:
        kwargs["context"] = graph_context
    if durability is not None:
        kwargs["durability"] = durability
    return kwargs


async def _stream_events(
    graph: Pregel,
    graph_input: Any,
    config: dict[str, Any],
    kwargs: dict[str, Any],
    convert: Callable[[Any], list[tuple[str, Any]]],
) -> AsyncIterator[tuple[str, Any]]:
    """The `events` mode: LangChain's events, with the root graph's own chunks converted."""
    root_run_id = str(config.get("run_id")) if config.get("run_id") else None
    async for event in graph.astream_events(  # type: ignore[call-overload]
        graph_input, config, version="v2", **kwargs
    ):
        if (
            event["event"] == "on_chain_stream"
            and root_run_id is not None
            and str(event.get("run_id")) == root_run_id
        ):
            for item in convert(event["data"]["chunk"]):
                yield item
        else:
            yield "events", to_jsonable(event)


def _protocol_transformers() -> list[Any]:
    # Beyond the built-in values, messages and lifecycle: `custom` (a node's stream writer).
    # Updates, tasks and checkpoints stay out, as on LangGraph Platform: each would be one
    # more event per step in every session run's log.
    from langgraph.stream.transformers import CustomTransformer

    return [CustomTransformer]


async def _stream_protocol(
    graph: Pregel,
    graph_input: Any,
    config: dict[str, Any],
    kwargs: dict[str, Any],
    final: FinalState | None,
) -> AsyncIterator[tuple[str, Any]]:
    """LangGraph's protocol events as (`method|namespace`, params) pairs."""
    # kwargs carries the context with the graph's defaults applied (run_context).
    options = {k: v for k, v in kwargs.items() if k not in ("stream_mode", "subgraphs")}
    with warnings.catch_warnings():
        # The v3 stream is marked beta; the session speaks exactly its protocol.
        warnings.filterwarnings("ignore", message="The v3 streaming protocol")
        stream = await graph.astream_events(  # type: ignore[call-overload]
            graph_input, config, version="v3", transformers=_protocol_transformers(), **options
        )
    async with stream:
        async for event in stream:
            params = event.get("params") or {}
            namespace = list(params.get("namespace") or [])
            method = str(event.get("method"))
            data = params.get("data")
            if method == "messages" and isinstance(data, list | tuple) and len(data) == 2:
                # (message event, metadata): the session's wire carries the event only.
                params = {**params, "data": data[0]}
            if final is not None and not namespace and method == "values":
                final.absorb("values", params.get("data"))
                if params.get("interrupts"):
                    final.interrupted = True
            yield _event_name(method, tuple(namespace)), to_jsonable(params)
    # The graph's stream ended without an error: readers need not ask how the run ended.
    yield PROTOCOL_END, {}
