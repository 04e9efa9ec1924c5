"""The grammar of the metadata filters auth handlers return, as LangGraph documents them.

A filter is an object whose keys are ANDed. A key names a metadata field and holds either a
plain JSON value or `{"$eq": value}` (the field equals it exactly) or `{"$contains": item}` /
`{"$contains": [items]}` (the field is a list holding every item). The keys `$or` and `$and`
hold a non-empty list of filters: one of them, or all of them, must hold. They nest.

Anything else starting with `$` is refused: a filter Runyard cannot read would otherwise match
nothing (everything hidden) or be skipped (everything shown).
"""

from __future__ import annotations

from typing import Any

from runyard.domain.errors import ConfigError

FIELD_OPERATORS = ("$eq", "$contains")
GROUP_OPERATORS = ("$or", "$and")
KNOWN = "$eq, $contains, $or and $and"


class AuthFilterError(ConfigError):
    """An auth handler returned a filter Runyard cannot apply (a server fault, answered 500)."""

    def __init__(self, message: str, operator: str) -> None:
        super().__init__(message)
        self.operator = operator


def check_filter(spec: Any) -> None:
    """Raise AuthFilterError unless `spec` is a filter of the grammar above."""
    if not isinstance(spec, dict):
        raise AuthFilterError(
            f"a filter must be an object, not {type(spec).__name__}", operator="-"
        )
    for key, wanted in spec.items():
        if key in GROUP_OPERATORS:
            for group in filter_groups(key, wanted):
                check_filter(group)
        elif isinstance(key, str) and key.startswith("$"):
            raise unknown_operator(key)
        else:
            field_operator(wanted)


def filter_groups(operator: str, groups: Any) -> list[dict[str, Any]]:
    """The filters a `$or`/`$and` holds; AuthFilterError unless a non-empty list of them."""
    if not isinstance(groups, list) or not groups:
        raise AuthFilterError(
            f"{operator} must hold a non-empty list of filter objects, got {groups!r}",
            operator=operator,
        )
    for group in groups:
        if not isinstance(group, dict) or not group:
            raise AuthFilterError(
                f"every entry of {operator} must be a non-empty filter object, got {group!r}",
                operator=operator,
            )
    return groups


def field_operator(wanted: Any) -> tuple[str, Any]:
    """(`$eq` or `$contains`, operand) for the value a field's key holds."""
    if isinstance(wanted, dict) and any(str(k).startswith("$") for k in wanted):
        if len(wanted) != 1:
            raise AuthFilterError(
                f"an operator object holds exactly one operator, got {sorted(wanted)}",
                operator=",".join(sorted(str(k) for k in wanted)),
            )
        operator, operand = next(iter(wanted.items()))
        if operator not in FIELD_OPERATORS:
            raise unknown_operator(str(operator))
        if operator == "$contains" and operand == []:
            raise AuthFilterError("$contains needs at least one item", operator=operator)
        return operator, operand
    return "$eq", wanted


def contained_items(operand: Any) -> list[Any]:
    """The items a `$contains` asks for: one item or a list of them."""
    return operand if isinstance(operand, list) else [operand]


def unknown_operator(operator: str) -> AuthFilterError:
    """The error for an operator outside the grammar."""
    return AuthFilterError(
        f"the filter uses the operator {operator!r}, which Runyard does not know; "
        f"filters may use {KNOWN}",
        operator=operator,
    )
