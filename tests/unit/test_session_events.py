"""The session's events from a run's log entries, and the filters of streams."""

from __future__ import annotations

import json
from typing import Any

import pytest

from runyard.streaming.session_events import (
    EventFilter,
    RunTranslator,
    parse_filter,
    parse_since,
)

CHILD = "child:1"
INNER = "inner:2"


def entry(method: str, namespace: list[str], data: Any, **extra: Any) -> tuple[str, str]:
    """A log entry as a session run's worker publishes it: (name, params JSON)."""
    name = "|".join([method, *namespace])
    return name, json.dumps({"namespace": namespace, "timestamp": 7, "data": data, **extra})


def feed(translator: RunTranslator, entries: list[tuple[str, str]]) -> list[dict[str, Any]]:
    """Every event the entries give, in order."""
    out = translator.start(1)
    for index, (name, data) in enumerate(entries, start=1):
        out.extend(translator.translate(str(index), name, data))
    return out


def phases(events: list[dict[str, Any]]) -> list[tuple[str, tuple[str, ...], str]]:
    """(method, namespace, lifecycle phase or interrupt id) of each event."""
    out = []
    for event in events:
        data = event["params"]["data"]
        mark = data.get("event") or data.get("interrupt_id") or ""
        out.append((event["method"], tuple(event["params"]["namespace"]), mark))
    return out


def test_subgraph_lifecycle_is_placed_in_its_namespace_and_closed_when_left() -> None:
    translator = RunTranslator("r", "graph")
    started = {"event": "started", "namespace": [CHILD], "graph_name": "child"}
    inner = {"event": "started", "namespace": [CHILD, INNER], "graph_name": "inner"}
    events = feed(
        translator,
        [
            entry("lifecycle", [], started),
            entry("values", [CHILD], {"a": 1}),
            entry("lifecycle", [], inner),
            entry("values", [CHILD], {"a": 2}),
            entry("values", [], {"a": 3}),
            ("protocol_end", "{}"),
        ],
    )
    events += translator.finish(translator.ended_as(), translator.error)
    assert phases(events) == [
        ("lifecycle", (), "running"),
        ("lifecycle", (CHILD,), "started"),
        ("values", (CHILD,), ""),
        ("lifecycle", (CHILD, INNER), "started"),
        ("lifecycle", (CHILD, INNER), "completed"),
        ("values", (CHILD,), ""),
        ("lifecycle", (CHILD,), "completed"),
        ("values", (), ""),
        ("lifecycle", (), "completed"),
    ]
    ids = [e["event_id"] for e in events]
    assert len(set(ids)) == len(ids)
    assert translator.tree()["children"][0]["children"][0]["graph_name"] == "inner"


def test_an_interrupt_is_an_input_request_then_the_run_is_interrupted() -> None:
    translator = RunTranslator("r", "graph")
    asked = [{"id": "i1", "value": {"question": "ok?"}}]
    events = feed(
        translator,
        [entry("values", [], {"a": 1}, interrupts=asked), ("protocol_end", "{}")],
    )
    assert translator.ended_as() == "interrupted"
    events += translator.finish("interrupted", None)
    assert phases(events) == [
        ("lifecycle", (), "running"),
        ("input.requested", (), "i1"),
        ("lifecycle", (), "interrupted"),
        ("values", (), ""),
    ]
    assert events[1]["params"]["data"] == {"interrupt_id": "i1", "payload": {"question": "ok?"}}
    assert "interrupts" not in events[3]["params"]
    assert translator.interrupts == {"i1": []}


def test_the_log_tells_a_failure_and_a_silent_log_asks_the_database() -> None:
    failed = RunTranslator("r", "graph")
    failed.translate("1", "error", json.dumps({"error": "ValueError", "message": "boom"}))
    assert failed.ended_as() == "error"
    (end,) = failed.finish("error", failed.error)
    assert end["params"]["data"] == {"event": "failed", "graph_name": "graph", "error": "boom"}
    assert RunTranslator("r", "graph").ended_as() is None
    (cancelled,) = RunTranslator("r", "graph").finish("interrupted", None)
    assert cancelled["params"]["data"]["error"] == "the run was cancelled"


def test_the_same_entries_give_the_same_events() -> None:
    entries = [entry("messages", [], {"event": "message-start"}), entry("values", [], {})]
    assert feed(RunTranslator("r", "g"), entries) == feed(RunTranslator("r", "g"), entries)


def event(method: str, namespace: list[str], data: Any = None) -> dict[str, Any]:
    return {"method": method, "params": {"namespace": namespace, "data": data or {}}}


def test_filters_select_channels_namespaces_and_depth() -> None:
    child = parse_filter({"channels": ["values"], "namespaces": [["child"]], "depth": 0})
    assert isinstance(child, EventFilter)
    assert child.matches(event("values", [CHILD]))
    assert not child.matches(event("values", [CHILD, INNER]))
    assert not child.matches(event("values", []))
    assert not child.matches(event("updates", [CHILD]))
    deep = parse_filter({"channels": ["values"], "namespaces": [[CHILD]]})
    assert isinstance(deep, EventFilter) and deep.matches(event("values", [CHILD, INNER]))
    named = parse_filter({"channels": ["custom:progress", "input"]})
    assert isinstance(named, EventFilter)
    assert named.matches(event("custom", [], {"name": "progress"}))
    assert not named.matches(event("custom", [], {"name": "other"}))
    assert named.matches(event("input.requested", []))


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"channels": []},
        {"channels": ["bogus"]},
        {"channels": ["custom:"]},
        {"channels": ["values"], "namespaces": [[1]]},
        {"channels": ["values"], "depth": -1},
        {"channels": ["values"], "depth": True},
        [],
    ],
)
def test_a_bad_filter_says_what_is_wrong(body: Any) -> None:
    assert isinstance(parse_filter(body), str)


def test_since_is_a_non_negative_integer() -> None:
    assert parse_since({}) is None
    assert parse_since({"since": 4}) == 4
    for bad in (-1, True, "4", 1.5):
        assert isinstance(parse_since({"since": bad}), str)
