"""The encryption context of the work in hand: what a custom encryption's context handler
derived from the caller (a tenant, a key id), stored beside the data it encrypts.

An API request sets it once the caller is authenticated; a worker sets it from the run it
executes. The checkpoint serializer reads it when it encrypts a blob.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any

# The key under which the context is stored beside encrypted JSON and in a run's kwargs,
# as LangGraph's server stores it.
CONTEXT_KEY = "__encryption_context__"

_current: ContextVar[dict[str, Any] | None] = ContextVar("runyard_encryption_context", default=None)


def current_context() -> dict[str, Any]:
    """The context of the request or run in hand (empty when none was derived)."""
    return _current.get() or {}


def use_context(context: dict[str, Any]) -> None:
    """Make `context` the current one for this task and the tasks it starts."""
    _current.set(context)
