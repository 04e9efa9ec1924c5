"""What an assign function may return (langgraph-sdk 0.4.14's PrioritySettings)."""

from __future__ import annotations

from typing import Any

import pytest

from runyard.domain.priority import PriorityAssignError, PrioritySettings, settings_from


@pytest.mark.parametrize(
    ("returned", "expected"),
    [
        (None, PrioritySettings(0, "default")),
        ({}, PrioritySettings(0, "default")),
        ({"priority": None, "fairness_group": ""}, PrioritySettings(0, "default")),
        ({"priority": -5, "fairness_group": "g" * 256}, PrioritySettings(-5, "g" * 256)),
        ({"priority": 5}, PrioritySettings(5, "default")),
    ],
)
def test_valid_settings_and_defaults(returned: Any, expected: PrioritySettings) -> None:
    assert settings_from(returned, "f") == expected


@pytest.mark.parametrize(
    ("returned", "said"),
    [
        ({"priority": 6}, "priority 6"),
        ({"priority": -6}, "priority -6"),
        ({"priority": True}, "priority True"),
        ({"priority": "1"}, "priority '1'"),
        ({"fairness_group": "g" * 257}, "257 characters"),
        ({"fairness_group": 3}, "fairness_group 3"),
        ({"fairness_weight": 2}, "'fairness_weight'"),
        ([1], "list"),
    ],
)
def test_invalid_settings_name_the_function_and_the_cause(returned: Any, said: str) -> None:
    with pytest.raises(PriorityAssignError) as caught:
        settings_from(returned, "the priority assign function p.py:assign")
    assert "p.py:assign" in caught.value.message and said in caught.value.message
