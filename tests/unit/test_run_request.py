"""A run's request read by name from its stored kwargs, older rows included."""

from __future__ import annotations

from runyard.domain.encryption_context import CONTEXT_KEY
from runyard.domain.run_request import RunRequest


def test_a_request_reads_every_key_by_name() -> None:
    request = RunRequest.of(
        {
            "graph_id": "agent",
            "input": {"x": 1},
            "config": {"configurable": {"k": "v"}},
            "context": {"c": 2},
            "checkpoint": {"checkpoint_id": "cp-1", "checkpoint_ns": "sub"},
            "stream_mode": ["updates", "values"],
            "stream_subgraphs": True,
            "interrupt_before": ["tool"],
            "durability": "sync",
            CONTEXT_KEY: {"tenant": "t"},
        }
    )
    assert request.graph_id == "agent" and request.input == {"x": 1}
    assert request.stream_mode == ("updates", "values") and request.stream_subgraphs
    assert request.starting_checkpoint == ("cp-1", "sub")
    assert request.interrupt_before == ["tool"] and request.durability == "sync"
    assert request.encryption_context == {"tenant": "t"}


def test_an_older_row_reads_as_the_defaults() -> None:
    request = RunRequest.of({"graph_id": "agent", "stream_mode": "messages"})
    assert request.stream_mode == ("messages",)
    assert RunRequest.of({"graph_id": "agent"}).stream_mode == ("values",)
    assert request.starting_checkpoint == (None, None)
    assert request.command is None and request.config is None and not request.stream_subgraphs


def test_the_checkpoint_id_given_on_its_own_wins() -> None:
    request = RunRequest.of(
        {"graph_id": "g", "checkpoint_id": "a", "checkpoint": {"checkpoint_id": "b"}}
    )
    assert request.starting_checkpoint == ("a", None)
