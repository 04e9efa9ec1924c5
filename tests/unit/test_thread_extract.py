"""The `extract` paths of thread search, resolved against a thread as clients receive it."""

from __future__ import annotations

from typing import Any

import pytest

from runyard.services.threads import extract_path

THREAD: dict[str, Any] = {
    "thread_id": "t",
    "metadata": {"graph_id": "agent", "owner": {"name": "ada"}},
    "values": {"messages": [{"content": "hi"}, {"content": "bye"}], "count": 0},
    "interrupts": {},
    "config": {},
}


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("metadata.graph_id", "agent"),
        ("metadata.owner.name", "ada"),
        ("values.messages[0].content", "hi"),
        ("values.messages[-1].content", "bye"),
        ("values.count", 0),
        ("values", THREAD["values"]),
        ("values.messages[5].content", None),
        ("values.messages[x]", None),
        ("values.count.deeper", None),
        ("values.missing.deeper", None),
        ("metadata.graph_id[0]", None),
    ],
)
def test_extract_path_resolves_or_gives_none(path: str, expected: Any) -> None:
    assert extract_path(THREAD, path) == expected
