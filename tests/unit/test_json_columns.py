"""JSON column values go through orjson where it agrees with the json module, else json."""

from __future__ import annotations

import json
import math

import pytest

from runyard.db.engine import json_dumps, json_loads

VALUES = [
    {"a": 1, "b": [1.5, None, True, "é"]},
    {"nested": {"deep": {"list": [{"x": -3}]}}},
    {"big": 2**70, "negative_big": -(2**65)},
    {"id": 12345678901234567890},
    [],
    "text",
    0,
]


@pytest.mark.parametrize("value", VALUES)
def test_values_survive_the_round_trip(value: object) -> None:
    assert json_loads(json_dumps(value)) == value
    assert json.loads(json_dumps(value)) == value


def test_integers_beyond_64_bits_are_read_exactly() -> None:
    stored = json.dumps({"n": 2**80 + 1})
    assert json_loads(stored) == {"n": 2**80 + 1}
    assert isinstance(json_loads(stored)["n"], int)


def test_integers_beyond_64_bits_are_read_exactly_from_bytes_too() -> None:
    stored = json.dumps({"n": -(2**70), "text": "digits 123 456"}).encode()
    assert json_loads(stored) == {"n": -(2**70), "text": "digits 123 456"}


def test_non_string_keys_are_written_as_strings_like_the_json_module() -> None:
    assert json.loads(json_dumps({1: "a"})) == json.loads(json.dumps({1: "a"}))


def test_text_only_the_json_module_reads_is_still_read() -> None:
    assert math.isnan(json_loads('{"x": NaN}')["x"])


def test_what_neither_can_write_still_fails() -> None:
    with pytest.raises(TypeError):
        json_dumps({"x": object()})
