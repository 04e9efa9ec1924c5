"""Thread retention: how long threads live and what their expiry does (pure, no I/O)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, cast

from runyard.domain.errors import ConfigError

TTLStrategy = Literal["delete", "keep_latest"]
TTL_STRATEGIES: tuple[TTLStrategy, ...] = ("delete", "keep_latest")


@dataclass(frozen=True)
class ThreadTTLPolicy:
    """`checkpointer.ttl` of langgraph.json, with LangGraph Platform's defaults."""

    strategy: TTLStrategy = "delete"
    default_ttl_minutes: float | None = None
    sweep_interval_minutes: float = 5.0
    sweep_limit: int = 10_000


def parse_checkpointer(raw: Any, source: str) -> ThreadTTLPolicy:
    """The `checkpointer` section of langgraph.json: only `ttl` is supported, and a key
    Runyard cannot honour (`path`, a custom saver; `serde`) stops start-up naming it."""
    if raw is None:
        return ThreadTTLPolicy()
    if not isinstance(raw, dict):
        raise ConfigError(f"{source}: 'checkpointer' must be an object")
    unsupported = sorted(set(raw) - {"ttl"})
    if unsupported:
        raise ConfigError(
            f"{source}: 'checkpointer' key(s) {unsupported} are not supported (Runyard keeps "
            "checkpoints in its own PostgreSQL or SQLite saver and serializer); remove them. "
            "Only 'checkpointer.ttl' is read"
        )
    return parse_thread_ttl(raw.get("ttl"), source)


def parse_thread_ttl(raw: Any, source: str) -> ThreadTTLPolicy:
    """The policy `checkpointer.ttl` describes; a ConfigError names the bad key."""
    if raw is None:
        return ThreadTTLPolicy()
    if not isinstance(raw, dict):
        raise ConfigError(f"{source}: 'checkpointer.ttl' must be an object")
    known = {"strategy", "default_ttl", "sweep_interval_minutes", "sweep_limit"}
    unknown = sorted(set(raw) - known)
    if unknown:
        raise ConfigError(
            f"{source}: unknown key(s) {unknown} in 'checkpointer.ttl'; "
            f"supported: {', '.join(sorted(known))}"
        )
    strategy = raw.get("strategy", "delete")
    if strategy not in TTL_STRATEGIES:
        raise ConfigError(
            f"{source}: 'checkpointer.ttl.strategy' must be 'delete' or 'keep_latest', "
            f"got {strategy!r}"
        )
    default_ttl = _positive(raw.get("default_ttl"), "default_ttl", source)
    interval = _positive(raw.get("sweep_interval_minutes"), "sweep_interval_minutes", source)
    limit = raw.get("sweep_limit", 10_000)
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
        raise ConfigError(f"{source}: 'checkpointer.ttl.sweep_limit' must be a positive integer")
    return ThreadTTLPolicy(
        strategy=cast(TTLStrategy, strategy),
        default_ttl_minutes=default_ttl,
        sweep_interval_minutes=interval if interval is not None else 5.0,
        sweep_limit=limit,
    )


def _positive(value: Any, key: str, source: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise ConfigError(f"{source}: 'checkpointer.ttl.{key}' must be a positive number (minutes)")
    return float(value)
