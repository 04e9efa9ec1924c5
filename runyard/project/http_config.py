"""The `http` section of `langgraph.json`: custom app, route switches, prefix, headers."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from runyard.domain.errors import ConfigError

# The route groups a `disable_*` switch can turn off, as LangGraph names them.
ROUTE_GROUPS = ("assistants", "threads", "runs", "store", "meta", "mcp", "a2a", "webhooks", "ui")
MIDDLEWARE_ORDERS = ("middleware_first", "auth_first")
# Read by other parts of the server (CORS) or documented as having nothing to act on.
PASSED_THROUGH = ("cors", "logging_headers")
KNOWN_KEYS = frozenset(
    {
        "app",
        "mount_prefix",
        "configurable_headers",
        "enable_custom_route_auth",
        "middleware_order",
        *PASSED_THROUGH,
        *(f"disable_{group}" for group in ROUTE_GROUPS),
    }
)
# Never copied into a run, whatever the patterns say (LangGraph refuses them too).
SECRET_HEADERS = frozenset({"authorization", "x-api-key", "x-service-key", "x-tenant-id"})
TRACE_HEADER = "langsmith-trace"


@dataclass(frozen=True)
class HeaderPatterns:
    """Which request headers a run sees in its `configurable` (LangGraph's `includes`/`excludes`).

    Only headers matching an include pattern and no exclude pattern are copied; `*` is the
    only wildcard, matched against lower-cased names. Without includes nothing is copied
    but the tracing header `langsmith-trace`.
    """

    includes: tuple[re.Pattern[str], ...] = ()
    excludes: tuple[re.Pattern[str], ...] = ()

    def select(self, headers: Iterable[tuple[str, str]]) -> dict[str, str]:
        """The headers to copy into a run's `configurable`, by lower-cased name."""
        if not self.includes:
            # The common case, on every run created: only the tracing header can pass.
            trace = [v for k, v in headers if k.lower() == TRACE_HEADER]
            return {TRACE_HEADER: trace[-1]} if trace else {}
        chosen: dict[str, str] = {}
        for raw_name, value in headers:
            name = raw_name.lower()
            if name == TRACE_HEADER or (name not in SECRET_HEADERS and self._wanted(name)):
                chosen[name] = value
        return chosen

    def _wanted(self, name: str) -> bool:
        if any(p.fullmatch(name) for p in self.excludes):
            return False
        return any(p.fullmatch(name) for p in self.includes)


@dataclass(frozen=True)
class HttpConfig:
    """What `http` in `langgraph.json` asks of the HTTP layer."""

    app: str | None = None
    mount_prefix: str | None = None
    disabled: frozenset[str] = frozenset()
    enable_custom_route_auth: bool = False
    middleware_order: str = "middleware_first"
    headers: HeaderPatterns = field(default_factory=HeaderPatterns)
    cors: dict[str, Any] | None = None

    def enabled(self, group: str) -> bool:
        """False when `http.disable_<group>` is set."""
        return group not in self.disabled


def parse_http(where: str, raw: Mapping[str, Any] | None) -> HttpConfig:
    """Validate the `http` object; errors name the key and what it accepts."""
    if raw is None:
        return HttpConfig()
    unknown = sorted(set(raw) - KNOWN_KEYS)
    if unknown:
        raise ConfigError(
            f"{where}: http.{unknown[0]} is not a key Runyard supports; known keys: "
            + ", ".join(sorted(KNOWN_KEYS))
        )
    disabled = set()
    for group in ROUTE_GROUPS:
        key = f"disable_{group}"
        if _flag(where, raw, key):
            disabled.add(group)
    order = raw.get("middleware_order") or "middleware_first"
    if order not in MIDDLEWARE_ORDERS:
        raise ConfigError(
            f"{where}: http.middleware_order must be 'middleware_first' or 'auth_first', "
            f"got {order!r}"
        )
    app = raw.get("app")
    if app is not None and (not isinstance(app, str) or ":" not in app):
        raise ConfigError(
            f"{where}: http.app must be 'path/to/file.py:app' or 'my.module:app', got {app!r}"
        )
    cors = raw.get("cors")
    if cors is not None and not isinstance(cors, dict):
        raise ConfigError(f"{where}: http.cors must be an object")
    return HttpConfig(
        app=app,
        mount_prefix=_mount_prefix(where, raw.get("mount_prefix")),
        disabled=frozenset(disabled),
        enable_custom_route_auth=_flag(where, raw, "enable_custom_route_auth"),
        middleware_order=order,
        headers=_header_patterns(where, "configurable_headers", raw.get("configurable_headers")),
        cors=cors,
    )


def _flag(where: str, raw: Mapping[str, Any], key: str) -> bool:
    value = raw.get(key, False)
    if not isinstance(value, bool):
        raise ConfigError(f"{where}: http.{key} must be true or false, got {value!r}")
    return value


def _mount_prefix(where: str, prefix: Any) -> str | None:
    if prefix is None or prefix == "":
        return None
    if not isinstance(prefix, str) or not prefix.startswith("/") or prefix.endswith("/"):
        raise ConfigError(
            f"{where}: http.mount_prefix must start with '/' and not end with '/' "
            f"(such as '/my-api' or '/api/v1'), got {prefix!r}"
        )
    return prefix


def _header_patterns(where: str, key: str, raw: Any) -> HeaderPatterns:
    if raw is None:
        return HeaderPatterns()
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: http.{key} must be an object with 'includes' / 'excludes'")
    unknown = sorted(set(raw) - {"includes", "excludes", "include", "exclude"})
    if unknown:
        raise ConfigError(
            f"{where}: http.{key}.{unknown[0]} is not known; use 'includes' or 'excludes'"
        )

    def compiled(*names: str) -> tuple[re.Pattern[str], ...]:
        patterns: Any = next((raw[n] for n in names if raw.get(n)), [])
        if not isinstance(patterns, list) or not all(isinstance(p, str) for p in patterns):
            raise ConfigError(f"{where}: http.{key}.{names[0]} must be a list of header names")
        # Only `*` is special: no regular expression a config could make slow.
        return tuple(
            re.compile(".*".join(re.escape(part) for part in p.lower().split("*")))
            for p in patterns
        )

    return HeaderPatterns(
        includes=compiled("includes", "include"), excludes=compiled("excludes", "exclude")
    )
