"""checkpointer of langgraph.json: ttl with LangGraph's defaults, errors naming the key."""

from __future__ import annotations

import pytest

from runyard.domain.errors import ConfigError
from runyard.domain.retention import ThreadTTLPolicy, parse_checkpointer, parse_thread_ttl


def test_absent_means_no_default_ttl_and_a_five_minute_sweep() -> None:
    assert parse_thread_ttl(None, "langgraph.json") == ThreadTTLPolicy()
    assert ThreadTTLPolicy().sweep_interval_minutes == 5.0
    assert ThreadTTLPolicy().default_ttl_minutes is None


def test_every_key_is_read() -> None:
    raw = {
        "strategy": "keep_latest",
        "default_ttl": 60,
        "sweep_interval_minutes": 1,
        "sweep_limit": 50,
    }
    assert parse_thread_ttl(raw, "langgraph.json") == ThreadTTLPolicy("keep_latest", 60.0, 1.0, 50)


@pytest.mark.parametrize(
    ("raw", "named"),
    [
        ({"default_ttl_minutes": 5}, "default_ttl_minutes"),
        ({"strategy": "archive"}, "strategy"),
        ({"default_ttl": -1}, "default_ttl"),
        ({"sweep_interval_minutes": "5"}, "sweep_interval_minutes"),
        ({"sweep_limit": 0}, "sweep_limit"),
        ("60", "checkpointer.ttl"),
    ],
)
def test_bad_values_name_the_key(raw: object, named: str) -> None:
    with pytest.raises(ConfigError, match=named) as caught:
        parse_thread_ttl(raw, "my/langgraph.json")
    assert "my/langgraph.json" in str(caught.value)


@pytest.mark.parametrize("key", ["path", "serde"])
def test_checkpointer_keys_runyard_cannot_honour_stop_start_up(key: str) -> None:
    with pytest.raises(ConfigError, match=key):
        parse_checkpointer({key: {}, "ttl": {"default_ttl": 5}}, "langgraph.json")


def test_checkpointer_with_only_ttl_is_read() -> None:
    assert parse_checkpointer({"ttl": {"default_ttl": 5}}, "x").default_ttl_minutes == 5.0
    assert parse_checkpointer(None, "x") == ThreadTTLPolicy()
