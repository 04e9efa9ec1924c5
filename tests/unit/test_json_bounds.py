"""The JSON bound (runyard/domain/json_bounds.py)."""

from __future__ import annotations

import pytest

from runyard.domain.json_bounds import MAX_JSON_DEPTH, JsonBoundError, load_bounded_json


@pytest.mark.parametrize(
    ("raw", "where", "word"),
    [
        ('{"a": {"b": [1, "\\ud800"]}}', "a.b.1", "surrogate"),
        ('{"a": {"\\udc00x": 1}}', "a", "surrogate"),
        ('{"limit": NaN}', "limit", "NaN"),
        ('{"x": [-Infinity]}', "x.0", "Infinity"),
        ('{"x": 1e400}', "x", "1e400"),
        ('{"input": {"messages": [{"content": "a\\u0000b"}]}}', "input.messages.0.content", "NUL"),
        ('{"metadata": {"k\\u0000": 1}}', "metadata", "NUL"),
        ('"\\u0000"', "command", "NUL"),
        ("[" * (MAX_JSON_DEPTH + 1) + "]" * (MAX_JSON_DEPTH + 1), "0.0.0", "levels"),
        ("[" * 10_000 + "]" * 10_000, "command", "levels"),
    ],
)
def test_out_of_bound_json_is_refused_naming_where(raw: str, where: str, word: str) -> None:
    with pytest.raises(JsonBoundError) as refused:
        load_bounded_json(raw, root="command")
    assert refused.value.where == where
    assert word in refused.value.message


@pytest.mark.parametrize(
    "raw",
    [
        "[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH,
        '{"emoji": "\\ud83d\\ude00", "text": "d\u00e9j\u00e0"}',
        "123456789012345678901234567890",  # read as an integer, not as orjson's float
        '{"many": [' + ",".join(["{}"] * 500) + "]}",
        '{"path": "C:\\\\u0000"}',  # an escaped backslash before u0000: text, no NUL
    ],
)
def test_in_bound_json_reads_as_the_standard_library_reads_it(raw: str) -> None:
    import json

    assert load_bounded_json(raw) == json.loads(raw)


def test_not_json_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        load_bounded_json("[1, 2")
