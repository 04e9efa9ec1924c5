"""Reads `langgraph.json` / `runyard.json`: graphs, dependencies, env, store, auth, http."""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runyard.domain.errors import ConfigError

CONFIG_NAMES = ("runyard.json", "langgraph.json")


@dataclass(frozen=True)
class GraphSpec:
    """One entry of the `graphs` mapping: where a graph lives."""

    graph_id: str
    file: Path
    attribute: str
    description: str | None = None


@dataclass(frozen=True)
class ProjectConfig:
    """The parsed configuration file, with every path resolved against its folder."""

    path: Path | None
    graphs: dict[str, GraphSpec]
    dependencies: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    store: dict[str, Any] | None = None
    auth: dict[str, Any] | None = None
    http: dict[str, Any] | None = None


def find_config(explicit: Path | None, cwd: Path | None = None) -> Path:
    """The config file to use: the explicit one, else runyard.json, else langgraph.json."""
    if explicit is not None:
        if not explicit.is_file():
            raise ConfigError(f"config file {explicit} does not exist")
        return explicit.resolve()
    base = cwd or Path.cwd()
    for name in CONFIG_NAMES:
        candidate = base / name
        if candidate.is_file():
            return candidate.resolve()
    raise ConfigError(
        f"no runyard.json or langgraph.json in {base}; pass --config PATH or set RUNYARD_CONFIG"
    )


def load_config(path: Path) -> ProjectConfig:
    """Parse and validate a config file; errors name the file and the key."""
    try:
        raw = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}") from exc
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: the top level must be a JSON object")
    base = path.parent
    graphs_raw = raw.get("graphs")
    if not isinstance(graphs_raw, dict) or not graphs_raw:
        raise ConfigError(f"{path}: 'graphs' must map graph ids to 'path/to/file.py:attribute'")
    graphs = {gid: _parse_graph(path, base, gid, spec) for gid, spec in graphs_raw.items()}
    deps = raw.get("dependencies", [])
    if not isinstance(deps, list) or not all(isinstance(d, str) for d in deps):
        raise ConfigError(f"{path}: 'dependencies' must be a list of strings")
    return ProjectConfig(
        path=path,
        graphs=graphs,
        dependencies=deps,
        env=_parse_env(path, base, raw.get("env")),
        store=_optional_object(path, raw, "store"),
        auth=_optional_object(path, raw, "auth"),
        http=_optional_object(path, raw, "http"),
    )


def _parse_graph(path: Path, base: Path, graph_id: str, spec: Any) -> GraphSpec:
    description = None
    if isinstance(spec, dict):
        description = spec.get("description")
        spec = spec.get("path")
    if not isinstance(spec, str) or ":" not in spec:
        raise ConfigError(
            f"{path}: graph {graph_id!r} must be 'path/to/file.py:attribute', got {spec!r}"
        )
    file_part, attribute = spec.rsplit(":", 1)
    if not file_part.endswith(".py"):
        raise ConfigError(
            f"{path}: graph {graph_id!r} must point at a .py file, got {file_part!r} "
            "(module paths are not supported; use the file path)"
        )
    return GraphSpec(graph_id, (base / file_part).resolve(), attribute, description)


def _parse_env(path: Path, base: Path, env: Any) -> dict[str, str]:
    if env is None:
        return {}
    if isinstance(env, dict):
        return {str(k): str(v) for k, v in env.items()}
    if isinstance(env, str):
        from dotenv import dotenv_values

        env_file = (base / env).resolve()
        if not env_file.is_file():
            raise ConfigError(f"{path}: env file {env_file} does not exist")
        return {k: v for k, v in dotenv_values(env_file).items() if v is not None}
    raise ConfigError(f"{path}: 'env' must be a file path or an object")


def _optional_object(path: Path, raw: dict[str, Any], key: str) -> dict[str, Any] | None:
    value = raw.get(key)
    if value is not None and not isinstance(value, dict):
        raise ConfigError(f"{path}: {key!r} must be an object")
    return value


def apply_environment(config: ProjectConfig) -> None:
    """Make local dependencies importable and export the config's env (never overriding)."""
    base = config.path.parent if config.path else Path.cwd()
    for dep in config.dependencies:
        candidate = (base / dep).resolve()
        if candidate.is_dir() and str(candidate) not in sys.path:
            sys.path.insert(0, str(candidate))
    for key, value in config.env.items():
        os.environ.setdefault(key, value)
