"""The thread streaming session's events: one run's log entries turned into protocol events.

A run started by the session streams LangGraph's protocol events (`values`, `messages`,
`lifecycle`, `updates`, `custom`, `tasks`, `checkpoints`, `tools`) into its ordinary,
replayable log. This module turns those entries into the wire events, adding what the
session owns: the root `lifecycle` (running, then completed, failed or interrupted), the
`completed` lifecycle of subgraphs execution has left, and an `input.requested` event per
interrupt. It is pure: the same entries always give the same events and ids, so any
instance replays a thread into exactly the same sequence.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from langchain_protocol import Channel, Namespace

from runyard.domain.status import RunStatus

# The channels a subscription may name, beside `custom:<name>`.
SUPPORTED_CHANNELS: frozenset[str] = frozenset(
    {
        "values",
        "updates",
        "messages",
        "tools",
        "custom",
        "lifecycle",
        "input",
        "tasks",
        "checkpoints",
    }
)


class LifecyclePhase(StrEnum):
    """Where a graph stands in a `lifecycle` event (the root's, or a subgraph's)."""

    RUNNING = "running"
    STARTED = "started"
    COMPLETED = "completed"
    FAILED = "failed"
    INTERRUPTED = "interrupted"


# Log entries that say how the run ended rather than carry an event.
_RUN_END = frozenset({"protocol_end", "error", "end", "metadata"})
_CHILD_END = frozenset(
    {LifecyclePhase.COMPLETED, LifecyclePhase.FAILED, LifecyclePhase.INTERRUPTED}
)
# Root lifecycle by the run's final status.
_ROOT_END: dict[str, LifecyclePhase] = {
    RunStatus.SUCCESS: LifecyclePhase.COMPLETED,
    RunStatus.ERROR: LifecyclePhase.FAILED,
    RunStatus.TIMEOUT: LifecyclePhase.FAILED,
}


def is_supported_channel(name: object) -> bool:
    """Whether `name` is a channel the session serves (`custom:<name>` included)."""
    if not isinstance(name, str):
        return False
    return name in SUPPORTED_CHANNELS or (name.startswith("custom:") and len(name) > 7)


def _segment_matches(candidate: str, wanted: str) -> bool:
    # `child` names every `child:<task id>`; a segment with its id must match exactly.
    return candidate == wanted or (":" not in wanted and candidate.split(":", 1)[0] == wanted)


def is_prefix(namespace: Sequence[str], prefix: Sequence[str]) -> bool:
    """Whether `namespace` lies under `prefix` (segments without an id match any id)."""
    if len(prefix) > len(namespace):
        return False
    return all(_segment_matches(namespace[i], seg) for i, seg in enumerate(prefix))


@dataclass(frozen=True)
class EventFilter:
    """What a stream or subscription wants: channels, namespace prefixes and depth."""

    channels: frozenset[str]
    namespaces: tuple[tuple[str, ...], ...] | None = None
    depth: int | None = None

    def matches(self, event: dict[str, Any]) -> bool:
        """Whether the event belongs to this filter."""
        method = event["method"]
        channel = "input" if method == "input.requested" else method
        params = event["params"]
        if channel == "custom":
            data = params.get("data")
            name = data.get("name") if isinstance(data, dict) else None
            if "custom" not in self.channels and (
                not isinstance(name, str) or f"custom:{name}" not in self.channels
            ):
                return False
        elif channel not in self.channels:
            return False
        if not self.namespaces:
            return True
        namespace = params.get("namespace") or []
        return any(
            is_prefix(namespace, prefix)
            and (self.depth is None or len(namespace) - len(prefix) <= self.depth)
            for prefix in self.namespaces
        )


def parse_filter(params: Any) -> EventFilter | str:
    """The filter a stream body or `subscription.subscribe` asks for, or what is wrong."""
    if not isinstance(params, dict):
        return "the body must be a JSON object with a channels array"
    channels = params.get("channels")
    if not isinstance(channels, list) or not channels:
        return "channels is required and must be a non-empty array"
    bad = [
        repr(c) if not isinstance(c, str) else c for c in channels if not is_supported_channel(c)
    ]
    if bad:
        return (
            f"channels contains unsupported entries: {', '.join(bad[:5])}. Allowed: "
            f"{', '.join(sorted(SUPPORTED_CHANNELS))}, or any `custom:<name>`."
        )
    namespaces: tuple[tuple[str, ...], ...] | None = None
    raw = params.get("namespaces")
    if raw is not None:
        if not isinstance(raw, list) or not all(
            isinstance(ns, list) and all(isinstance(s, str) for s in ns) for ns in raw
        ):
            return "namespaces must be an array of namespaces (arrays of strings)"
        namespaces = tuple(tuple(ns) for ns in raw) or None
    depth = params.get("depth")
    if depth is not None and (not isinstance(depth, int) or isinstance(depth, bool) or depth < 0):
        return "depth must be a non-negative integer"
    wanted: frozenset[Channel] = frozenset(channels)
    return EventFilter(frozenset(wanted), namespaces, depth)


def parse_since(params: dict[str, Any]) -> int | str | None:
    """The `since` cursor of a stream body (None when absent), or what is wrong."""
    since = params.get("since")
    if since is None:
        return None
    if not isinstance(since, int) or isinstance(since, bool) or since < 0:
        return "since must be a non-negative integer (the last seq received)"
    return since


def protocol_event(event_id: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
    """An event without its seq (the thread's numbering adds it)."""
    return {"type": "event", "event_id": event_id, "method": method, "params": params}


@dataclass
class _Scope:
    status: LifecyclePhase
    graph_name: str


@dataclass
class RunTranslator:
    """One run's log entries to protocol events, in order."""

    run_id: str
    graph_name: str
    scopes: dict[tuple[str, ...], _Scope] = field(default_factory=dict)
    interrupts: dict[str, list[str]] = field(default_factory=dict)
    root_status: LifecyclePhase = LifecyclePhase.RUNNING
    last_timestamp: int = 0
    # How the log says the run ended: the graph returned, or the error it failed with.
    returned: bool = False
    error: str | None = None

    def start(self, timestamp: int) -> list[dict[str, Any]]:
        """The root's `running` lifecycle, first event of every run."""
        self.last_timestamp = timestamp
        return [self._lifecycle((), LifecyclePhase.RUNNING, self.graph_name)]

    def translate(self, entry_id: str, name: str, data: str) -> list[dict[str, Any]]:
        """The events one log entry (`method|namespace...`, params) gives; their ids derive
        from the entry's id."""
        if name in _RUN_END:
            self._note_end(name, data)
            return []
        try:
            params = json.loads(data)
        except ValueError:
            return []
        if not isinstance(params, dict):
            return []
        namespace = tuple(params.get("namespace") or ())
        if isinstance(params.get("timestamp"), int):
            self.last_timestamp = params["timestamp"]
        method = name.split("|", 1)[0]
        payload = params.get("data")
        if method == "lifecycle" and isinstance(payload, dict) and payload.get("namespace"):
            # LangGraph reports a subgraph's lifecycle from the root, naming the subgraph.
            namespace = tuple(payload["namespace"])
            params["namespace"] = list(namespace)
        out = self._close_left(namespace)
        if method == "lifecycle":
            out.extend(self._child_lifecycle(namespace, params))
        elif method == "values":
            interrupts = params.pop("interrupts", None) or []
            out.extend(self._interrupted(namespace, interrupts))
            out.append(protocol_event("", method, params))
        else:
            out.append(protocol_event("", method, params))
        return _numbered(out, f"{self.run_id}:{entry_id}")

    def ended_as(self) -> RunStatus | None:
        """The run's final status when its log tells it (None: ask the database)."""
        if self.error is not None:
            return RunStatus.ERROR
        if self.returned:
            if self.root_status == LifecyclePhase.INTERRUPTED:
                return RunStatus.INTERRUPTED
            return RunStatus.SUCCESS
        return None

    def _note_end(self, name: str, data: str) -> None:
        if name == "protocol_end":
            self.returned = True
        elif name == "error":
            try:
                error = json.loads(data)
            except ValueError:
                error = None
            message = (
                error.get("message") or error.get("error") if isinstance(error, dict) else None
            )
            self.error = str(message or "the run failed")

    def finish(self, status: str | None, error: str | None) -> list[dict[str, Any]]:
        """The closing lifecycle events once the run has ended with `status`."""
        out = self._close_left(None)
        stopped = self.root_status == LifecyclePhase.INTERRUPTED
        if stopped and status in (RunStatus.INTERRUPTED, RunStatus.SUCCESS):
            return out  # stopped at an interrupt: input.respond starts the next run
        phase = _ROOT_END.get(status or "", LifecyclePhase.FAILED)
        if phase == LifecyclePhase.FAILED and error is None:
            cancelled = status == RunStatus.INTERRUPTED
            error = "the run was cancelled" if cancelled else "the run was removed"
        self.root_status = phase
        event = self._lifecycle((), phase, self.graph_name)
        if phase == LifecyclePhase.FAILED:
            event["params"]["data"]["error"] = error
        out.append(event)
        return out

    def tree(self) -> dict[str, Any]:
        """The run's agent tree: the root and every subgraph seen, with their status."""
        return self._node((), self.root_status, self.graph_name)

    def _node(
        self, namespace: tuple[str, ...], status: LifecyclePhase, name: str
    ) -> dict[str, Any]:
        node: dict[str, Any] = {
            "namespace": list(namespace),
            "status": status.value,
            "graph_name": name,
        }
        children = sorted(
            ns for ns in self.scopes if len(ns) == len(namespace) + 1 and ns[:-1] == namespace
        )
        if children:
            node["children"] = [
                self._node(ns, self.scopes[ns].status, self.scopes[ns].graph_name)
                for ns in children
            ]
        return node

    def _child_lifecycle(
        self, namespace: tuple[str, ...], params: dict[str, Any]
    ) -> list[dict[str, Any]]:
        data = params.get("data")
        phase = data.get("event") if isinstance(data, dict) else None
        if not namespace or not isinstance(data, dict):
            return []  # the root's lifecycle is the session's own
        scope = self.scopes.get(namespace)
        if phase == LifecyclePhase.STARTED:
            if scope is not None and scope.status == LifecyclePhase.STARTED:
                return []
            name = str(data.get("graph_name") or namespace[-1].split(":", 1)[0])
            self.scopes[namespace] = _Scope(LifecyclePhase.STARTED, name)
            return [protocol_event("", "lifecycle", params)]
        if scope is None or scope.status != LifecyclePhase.STARTED or phase not in _CHILD_END:
            return []
        scope.status = LifecyclePhase(phase)
        return [self._lifecycle(namespace, scope.status, scope.graph_name)]

    def _close_left(self, current: tuple[str, ...] | None) -> list[dict[str, Any]]:
        """`completed` for the subgraphs execution has left (all of them at the end)."""
        left = [
            ns
            for ns, scope in self.scopes.items()
            if scope.status == LifecyclePhase.STARTED
            and (current is None or not is_prefix(current, ns))
        ]
        out = []
        for ns in sorted(left, key=len, reverse=True):
            self.scopes[ns].status = LifecyclePhase.COMPLETED
            out.append(self._lifecycle(ns, LifecyclePhase.COMPLETED, self.scopes[ns].graph_name))
        return out

    def _interrupted(
        self, namespace: tuple[str, ...], interrupts: list[Any]
    ) -> list[dict[str, Any]]:
        out = []
        for item in interrupts:
            if not isinstance(item, dict) or not isinstance(item.get("id"), str):
                continue
            interrupt_id = item["id"]
            if interrupt_id in self.interrupts:
                continue
            self.interrupts[interrupt_id] = list(namespace)
            data: dict[str, Any] = {"interrupt_id": interrupt_id}
            if "value" in item:
                data["payload"] = item["value"]
            key = "|".join(namespace)
            out.append(
                protocol_event(
                    f"synth:{self.run_id}:input|{key}|{interrupt_id}",
                    "input.requested",
                    self._params(namespace, data),
                )
            )
        if out and self.root_status != LifecyclePhase.INTERRUPTED:
            self.root_status = LifecyclePhase.INTERRUPTED
            out.append(self._lifecycle((), LifecyclePhase.INTERRUPTED, self.graph_name))
        return out

    def _lifecycle(
        self, namespace: tuple[str, ...], phase: LifecyclePhase, name: str
    ) -> dict[str, Any]:
        key = "|".join(namespace)
        data = {"event": phase.value, "graph_name": name}
        return protocol_event(
            f"synth:{self.run_id}:lc|{key}|{phase.value}",
            "lifecycle",
            self._params(namespace, data),
        )

    def _params(self, namespace: Namespace | tuple[str, ...], data: Any) -> dict[str, Any]:
        return {"namespace": list(namespace), "timestamp": self.last_timestamp, "data": data}


def _numbered(events: list[dict[str, Any]], base: str) -> list[dict[str, Any]]:
    """Give the events that came from one entry its id, then `id.1`, `id.2`..."""
    n = 0
    for event in events:
        if event["event_id"]:
            continue
        event["event_id"] = base if n == 0 else f"{base}.{n}"
        n += 1
    return events
