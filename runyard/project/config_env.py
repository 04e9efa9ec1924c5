"""The project's configuration from a file, or from the environment of an image built for
LangGraph's server.

`langgraph build` writes no langgraph.json into its image: it sets `LANGSERVE_GRAPHS` and
the JSON forms of the other keys (`LANGGRAPH_HTTP`, `LANGGRAPH_STORE`, `LANGGRAPH_AUTH`...)
as environment variables, and the server reads those. Runyard reads them the same way when
it finds no config file. A config file, when there is one, is the whole configuration, as
`langgraph dev` makes it: the JSON forms beside it are named in a warning and not read.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from runyard.domain.errors import ConfigError
from runyard.domain.langgraph_env import CONFIG_ENV_NAMES
from runyard.project.config import (
    ProjectConfig,
    declared_auth_path,
    find_config,
    load_config,
    project_from_raw,
)

log = logging.getLogger("runyard.config")

ENVIRONMENT = Path("the environment (LANGSERVE_GRAPHS)")


def load_project(
    config_path: Path | None, environ: Mapping[str, str] = os.environ, cwd: Path | None = None
) -> ProjectConfig:
    """The project: its config file (the one named, else runyard.json or langgraph.json in
    `cwd`), else the JSON forms in `environ` when LANGSERVE_GRAPHS is set."""
    try:
        path = find_config(config_path, cwd)
    except ConfigError:
        raw = raw_from_environment(environ)
        if config_path is not None or raw is None:
            raise
        return project_from_raw(raw, cwd or Path.cwd(), ENVIRONMENT)
    ignored = [name for name in CONFIG_ENV_NAMES.values() if environ.get(name)]
    if ignored:
        log.warning(
            "langgraph_environment_config_ignored names=%s config=%s reason=%s",
            ",".join(ignored),
            path,
            "the config file is the whole configuration, as under langgraph dev",
        )
    return load_config(path)


def raw_from_environment(environ: Mapping[str, str]) -> dict[str, Any] | None:
    """The config keys the environment declares, or None without LANGSERVE_GRAPHS."""
    if not environ.get(CONFIG_ENV_NAMES["graphs"]):
        return None
    raw: dict[str, Any] = {}
    for key, name in CONFIG_ENV_NAMES.items():
        text = environ.get(name)
        if not text:
            continue
        try:
            value = json.loads(text)
        except ValueError as exc:
            raise ConfigError(f"{name} is not valid JSON ({exc}): {text[:200]}") from None
        if not isinstance(value, dict):
            raise ConfigError(f"{name} must be a JSON object, as langgraph.json's {key!r}")
        raw[key] = value
    return raw


def declared_auth(config_path: Path | None, environ: Mapping[str, str] = os.environ) -> str | None:
    """The `auth.path` the project names (file or environment), read without importing it."""
    try:
        return declared_auth_path(find_config(config_path))
    except ConfigError:
        raw = raw_from_environment(environ)
        if config_path is not None or raw is None:
            raise
    value = raw.get("auth", {}).get("path")
    return value if isinstance(value, str) and value else None
