"""The bound every JSON the API takes must fit, so that what Runyard stores it can read back.

Refused, naming where: a lone surrogate (in a string or a key: no UTF-8 text holds one, so
PostgreSQL refuses it and the serializers fail on it), a NUL character (PostgreSQL stores
none in text or JSONB; the embedded store refuses it too, so a project behaves alike on
both), NaN, Infinity and numbers past the double's range such as 1e400 (JSON has none; they
would be stored as null), and nesting deeper than MAX_JSON_DEPTH levels (the serializers of
events, checkpoints and store items stop at a few hundred levels, and a value wrapped in an
answer is deeper than it was sent).
"""

from __future__ import annotations

import json
import math
from typing import Any

import orjson

from runyard.domain.errors import InvalidInputError

# Levels of objects and arrays in one JSON document, the document itself the first.
MAX_JSON_DEPTH = 100
# How much of the path to a too deep value a message names.
DEPTH_PATH_SHOWN = 3


class JsonBoundError(InvalidInputError):
    """A JSON document outside the bound; `where` is the dotted path of the offending field."""

    def __init__(self, where: str, problem: str) -> None:
        super().__init__(f"{where}: {problem}")
        self.where = where
        self.problem = problem


def load_bounded_json(raw: bytes | str, root: str = "body") -> Any:
    """The parsed document (as the standard library reads it); JsonBoundError if it is outside
    the bound, ValueError if it is not JSON at all. `root` names the document itself."""
    check_json_text(raw, root)
    return json.loads(raw)


def check_json_text(raw: bytes | str, root: str = "body") -> None:
    """JsonBoundError if the JSON text is outside the bound; ValueError if it is not JSON.

    orjson refuses what the bound refuses but depth (and little else), at a fraction of the
    cost of a walk; a text it reads with fewer objects and arrays than the depth bound cannot
    be too deep, and one with more is measured level by level. A refused text is read again
    by the standard library (orjson reads integers past 64 bits as floats) to name the field.
    """
    try:
        value = orjson.loads(raw)
        # JSON text holds a NUL only as the escape \u0000, which orjson reads.
        nul = b"\\u0000" in raw if isinstance(raw, bytes) else "\\u0000" in raw
        if not nul and (_containers(raw) <= MAX_JSON_DEPTH or not _too_deep(value)):
            return
    except orjson.JSONDecodeError:
        pass  # find what it refused, and where
    try:
        value = json.loads(raw)
    except RecursionError:
        raise JsonBoundError(root, depth_problem()) from None
    check_bounded_json(value, root)


def check_bounded_json(value: Any, root: str = "body") -> None:
    """Raise JsonBoundError naming the first field of `value` outside the bound."""
    stack: list[tuple[Any, tuple[str, ...], int]] = [(value, (), 1)]
    while stack:
        item, path, depth = stack.pop()
        if isinstance(item, str):
            _check_text(item, path, root)
        elif isinstance(item, float):
            if not math.isfinite(item):
                raise JsonBoundError(_where(path, root), NON_FINITE_PROBLEM)
        elif isinstance(item, dict | list):
            if depth > MAX_JSON_DEPTH:
                raise JsonBoundError(_where(path[:DEPTH_PATH_SHOWN], root), depth_problem())
            pairs = item.items() if isinstance(item, dict) else enumerate(item)
            for key, child in reversed(list(pairs)):
                if isinstance(key, str):
                    _check_text(key, path, root)
                stack.append((child, (*path, str(key)), depth + 1))


def depth_problem() -> str:
    """What a client reads when its JSON is nested too deep."""
    return (
        f"nested deeper than {MAX_JSON_DEPTH} levels of objects and arrays, the bound on every "
        "JSON Runyard stores (docs/open-routes-and-limits.md); flatten the value"
    )


SURROGATE_PROBLEM = (
    "holds a lone surrogate (\\ud800-\\udfff without its pair), which is no Unicode text and "
    "cannot be stored; send valid UTF-8 text"
)
NON_FINITE_PROBLEM = (
    "holds NaN, Infinity or a number outside the finite range of a double (such as 1e400), "
    "which JSON cannot store; send a finite number, or the value as a string"
)


NUL_PROBLEM = (
    "holds a NUL character (\\u0000), which the database cannot store in text or JSON; remove it"
)


def _check_text(text: str, path: tuple[str, ...], root: str) -> None:
    if _has_surrogate(text):
        raise JsonBoundError(_where(path, root), SURROGATE_PROBLEM)
    if "\x00" in text:
        raise JsonBoundError(_where(path, root), NUL_PROBLEM)


def _has_surrogate(text: str) -> bool:
    if text.isascii():
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _where(path: tuple[str, ...], root: str) -> str:
    return ".".join(path) if path else root


def _too_deep(value: Any) -> bool:
    """Whether objects and arrays nest deeper than MAX_JSON_DEPTH (one pass per level)."""
    level = [value] if isinstance(value, dict | list) else []
    depth = 0
    while level:
        depth += 1
        if depth > MAX_JSON_DEPTH:
            return True
        level = [
            child
            for item in level
            for child in (item.values() if isinstance(item, dict) else item)
            if isinstance(child, dict | list)
        ]
    return False


def _containers(raw: bytes | str) -> int:
    if isinstance(raw, str):
        return raw.count("{") + raw.count("[")
    return raw.count(b"{") + raw.count(b"[")
