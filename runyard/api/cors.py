"""Cross-origin requests: LangGraph's defaults, `http.cors` in langgraph.json, CORS_ALLOW_ORIGINS.

With nothing configured every origin may call the server with any method and header, as
LangGraph's server allows, so a chat page on another port or host works against
`runyard dev` at once. `http.cors` takes Starlette's CORSMiddleware options; a key it leaves
out keeps the default below instead of Starlette's much narrower one (GET only, no headers),
which would block every SDK call that sends JSON.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from runyard.domain.config_keys import refuse_unknown_keys
from runyard.domain.errors import ConfigError
from runyard.settings import Settings

# Headers the SDKs read from a cross-origin answer: pagination, and the run a stream
# belongs to (Content-Location) and where to reconnect it (Location).
EXPOSED_HEADERS = ("x-pagination-total", "x-pagination-next", "content-location", "location")

_LIST_KEYS = ("allow_origins", "allow_methods", "allow_headers", "expose_headers")
_BOOL_KEYS = ("allow_credentials", "allow_private_network")
_KNOWN_KEYS = (*_LIST_KEYS, *_BOOL_KEYS, "allow_origin_regex", "max_age")


def cors_options(
    allow_origins: list[str] | None,
    allow_private_network: bool = False,
    http: dict[str, Any] | None = None,
    source: Path | None = None,
) -> dict[str, Any]:
    """Keyword arguments of Starlette's CORSMiddleware for these settings and `http` section.

    `allow_origins` is CORS_ALLOW_ORIGINS (None when unset). Credentials are allowed only
    when origins are listed: a wildcard with credentials would let any site act as the user.
    `allow_private_network` answers Chrome's preflight before a public page calls a server
    on this machine or network, as `langgraph dev` does.
    """
    cors = _read_cors(http, source)
    if "allow_origins" in cors:
        origins = cors["allow_origins"]
    elif allow_origins is not None:
        origins = allow_origins
    else:
        # A regex alone restricts origins; a wildcard beside it would make it moot.
        origins = [] if "allow_origin_regex" in cors else ["*"]
    options: dict[str, Any] = {
        "allow_origins": origins,
        "allow_methods": ["*"],
        "allow_headers": ["*"],
        "expose_headers": list(EXPOSED_HEADERS),
        "allow_credentials": "*" not in origins,
        "allow_private_network": allow_private_network,
    }
    options.update(cors)
    options["allow_origins"] = origins
    return options


def _read_cors(http: dict[str, Any] | None, source: Path | None) -> dict[str, Any]:
    where = f"{source}: " if source else ""
    cors = (http or {}).get("cors")
    if cors is None:
        return {}
    if not isinstance(cors, dict):
        raise ConfigError(f"{where}http.cors must be an object of CORS options")
    refuse_unknown_keys(source, "http.cors", cors, _KNOWN_KEYS)
    for key in _LIST_KEYS:
        value = cors.get(key)
        if value is not None and (
            not isinstance(value, list) or not all(isinstance(v, str) for v in value)
        ):
            raise ConfigError(f"{where}http.cors.{key} must be a list of strings, got {value!r}")
    checks: list[tuple[str, type, str]] = [(key, bool, "a boolean") for key in _BOOL_KEYS]
    checks += [("allow_origin_regex", str, "a string"), ("max_age", int, "an integer")]
    for key, kind, described in checks:
        value = cors.get(key)
        wrong = not isinstance(value, kind) or (kind is int and isinstance(value, bool))
        if value is not None and wrong:
            raise ConfigError(f"{where}http.cors.{key} must be {described}, got {value!r}")
    return {key: value for key, value in cors.items() if value is not None}


def allowed_origins(settings: Settings) -> list[str] | None:
    """The origins of CORS_ALLOW_ORIGINS, or None when it is unset (every origin)."""
    if settings.cors_allow_origins is None:
        return None
    return [origin.strip() for origin in settings.cors_allow_origins.split(",") if origin.strip()]


def private_network_allowed(settings: Settings) -> bool:
    """Whether private-network preflights are allowed: by default only in dev mode."""
    if settings.allow_private_network is not None:
        return settings.allow_private_network
    return settings.dev_mode
