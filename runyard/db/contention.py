"""Recognizes a transaction that lost to a concurrent one (deadlock, serialization failure).

Such a transaction did nothing (PostgreSQL rolled it back whole), so running it again is
safe and is what the caller does, a bounded number of times, instead of answering 500.
"""

from __future__ import annotations

from collections.abc import Iterator

# 40P01 deadlock detected, 40001 serialization failure.
_CONTENTION_SQLSTATES = frozenset({"40P01", "40001"})
_CONTENTION_NAMES = frozenset({"DeadlockDetectedError", "SerializationError"})


def lost_to_contention(exc: BaseException) -> bool:
    """True when `exc` (or what it wraps) is a deadlock or a serialization failure."""
    for error in _chain(exc):
        sqlstate = getattr(error, "sqlstate", None) or getattr(error, "pgcode", None)
        if sqlstate in _CONTENTION_SQLSTATES or type(error).__name__ in _CONTENTION_NAMES:
            return True
    return False


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    pending: list[BaseException | None] = [exc]
    while pending:
        current = pending.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        orig = getattr(current, "orig", None)
        pending += [
            current.__cause__,
            current.__context__,
            orig if isinstance(orig, BaseException) else None,
        ]
