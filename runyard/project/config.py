"""Reads `langgraph.json` / `runyard.json`: graphs, dependencies, env, store, auth, priority,
http, webhooks, ui, encryption."""

from __future__ import annotations

import json
import logging
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runyard.domain.config_keys import refuse_unknown_keys
from runyard.domain.errors import ConfigError
from runyard.project.http_config import HttpConfig, parse_http
from runyard.project.webhooks_config import WebhooksConfig, parse_webhooks

log = logging.getLogger("runyard.config")

CONFIG_NAMES = ("runyard.json", "langgraph.json")

# Keys of LangGraph's config schema the server acts on.
SERVED_KEYS = frozenset(
    {
        "graphs",
        "dependencies",
        "env",
        "store",
        "auth",
        "priority",
        "http",
        "checkpointer",
        "webhooks",
        "ui",
        "ui_config",
        "encryption",
    }
)
# Keys that describe how an image is built (`langgraph build`): accepted, no effect on serving.
IMAGE_KEYS = frozenset(
    {
        "$schema",
        "python_version",
        "node_version",
        "api_version",
        "base_image",
        "image_distro",
        "pip_config_file",
        "pip_installer",
        "source",
        "dockerfile_lines",
        "keep_pkg_tools",
        "_INTERNAL_docker_tag",
    }
)
# Keys of the schema Runyard does not implement: start-up fails rather than ignore them.
UNSUPPORTED_KEYS = {
    "disable_persistence": "`langgraph dev` keeping nothing across restarts; Runyard always "
    "persists (delete the data folder to start afresh)",
}
# Accepted when they ask for what Runyard does anyway.
DEFAULT_VALUES = {"disable_persistence": False}
# Sub-keys of LangGraph's schema that Runyard refuses, and exactly why.
REFUSED_SUB_KEYS = {
    ("checkpointer", "path"): "a checkpointer of your own would replace Runyard's, whose "
    "checkpoint writes are fenced by the run's attempt (so an instance that lost a run can "
    "no longer write its checkpoints); Runyard keeps checkpoints in its database",
    ("checkpointer", "serde"): "Runyard's checkpoints are written with LangGraph's default "
    "serializer by every instance and its options (allowed_msgpack_modules, "
    "allowed_json_modules, pickle_fallback) are not applied, so they are refused rather "
    "than ignored",
    ("store", "path"): "a store of your own would replace Runyard's PostgreSQL / SQLite store, "
    "which the /store routes, TTL sweeps and semantic index run on",
}
# Keys of the objects inside `store` (langgraph_cli's IndexConfig and TTLConfig).
STORE_SUB_KEYS = {
    "index": frozenset({"embed", "dims", "fields"}),
    "ttl": frozenset({"refresh_on_read", "default_ttl", "sweep_interval_minutes"}),
}
SECTION_KEYS = {
    "store": frozenset({"index", "ttl", "path"}),
    "auth": frozenset({"path", "disable_studio_auth", "openapi", "cache"}),
    "priority": frozenset({"path"}),
    "checkpointer": frozenset({"ttl", "path", "serde"}),
    "ui_config": frozenset({"shared"}),
    "encryption": frozenset({"path"}),
}


@dataclass(frozen=True)
class GraphSpec:
    """One entry of the `graphs` mapping: where a graph lives."""

    graph_id: str
    file: Path | None
    attribute: str
    description: str | None = None
    module: str | None = None

    @property
    def location(self) -> str:
        """Where the graph is declared, as written: `file.py:attr` or `package.module:attr`."""
        return f"{self.module or self.file}:{self.attribute}"


@dataclass(frozen=True)
class ProjectConfig:
    """The parsed configuration file, with every path resolved against its folder."""

    path: Path | None
    graphs: dict[str, GraphSpec]
    dependencies: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    store: dict[str, Any] | None = None
    auth: dict[str, Any] | None = None
    # `priority.path`: the langgraph_sdk.Priority object whose assign function decides a
    # thread's priority settings.
    priority: dict[str, Any] | None = None
    http: dict[str, Any] | None = None
    checkpointer: dict[str, Any] | None = None
    # `encryption.path`: the custom encryption handlers (runyard/project/encryption_loading.py).
    encryption: dict[str, Any] | None = None
    webhooks: WebhooksConfig = field(default_factory=WebhooksConfig)
    # Generative UI: graph id -> the component module (`./src/ui.tsx`), as written.
    ui: dict[str, str] = field(default_factory=dict)
    # `ui_config.shared`: packages the UI bundles leave to the page that loads them.
    ui_shared: list[str] = field(default_factory=list)

    @property
    def project_dir(self) -> Path:
        """The folder the config's relative paths start from."""
        return self.path.parent if self.path else Path.cwd()

    @property
    def http_config(self) -> HttpConfig:
        """The validated `http` section."""
        return parse_http(str(self.path or "config"), self.http)


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
        f"no runyard.json or langgraph.json in {base}; pass --config PATH or set RUNYARD_CONFIG "
        "(or LANGSERVE_GRAPHS, as in an image built for LangGraph's server)"
    )


def load_config(path: Path) -> ProjectConfig:
    """Parse and validate a config file; errors name the file and the key."""
    return project_from_raw(_read_object(path), path.parent, path, path)


def project_from_raw(
    raw: dict[str, Any], base: Path, source: Path, file: Path | None = None
) -> ProjectConfig:
    """Parse and validate a config's keys: relative paths start at `base`, errors name
    `source` (the file, or the environment the keys came from), `file` is the config file."""
    _check_keys(source, raw)
    graphs_raw = raw.get("graphs")
    if not isinstance(graphs_raw, dict) or not graphs_raw:
        raise ConfigError(f"{source}: 'graphs' must map graph ids to 'path/to/file.py:attribute'")
    graphs = {gid: _parse_graph(source, base, gid, spec) for gid, spec in graphs_raw.items()}
    deps = raw.get("dependencies", [])
    if not isinstance(deps, list) or not all(isinstance(d, str) for d in deps):
        raise ConfigError(f"{source}: 'dependencies' must be a list of strings")
    env = _parse_env(source, base, raw.get("env"))
    return ProjectConfig(
        path=file,
        graphs=graphs,
        dependencies=deps,
        env=env,
        store=_optional_object(source, raw, "store"),
        auth=_optional_object(source, raw, "auth"),
        priority=_optional_object(source, raw, "priority"),
        http=_optional_object(source, raw, "http"),
        checkpointer=_optional_object(source, raw, "checkpointer"),
        encryption=_optional_object(source, raw, "encryption"),
        # Header templates read the environment the server will have (the config's env
        # never overrides it, see apply_environment).
        webhooks=parse_webhooks(str(source), raw.get("webhooks"), {**env, **os.environ}),
        ui=_parse_ui(source, base, raw.get("ui")),
        ui_shared=_parse_ui_shared(source, _optional_object(source, raw, "ui_config")),
    )


def declared_auth_path(path: Path) -> str | None:
    """The `auth.path` a config file names, read without importing or checking anything else."""
    auth = _read_object(path).get("auth")
    value = auth.get("path") if isinstance(auth, dict) else None
    return value if isinstance(value, str) and value else None


def declares_ui(path: Path) -> bool:
    """True when a config file has a non-empty `ui`, read without checking anything else."""
    return bool(_read_object(path).get("ui"))


def _read_object(path: Path) -> dict[str, Any]:
    try:
        raw = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}") from exc
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: the top level must be a JSON object")
    return raw


def _check_keys(path: Path, raw: dict[str, Any]) -> None:
    """Fail on a key Runyard would otherwise read and drop, naming it."""
    for key in raw:
        if key in DEFAULT_VALUES and raw[key] == DEFAULT_VALUES[key]:
            continue
        if key in UNSUPPORTED_KEYS:
            raise ConfigError(
                f"{path}: '{key}' ({UNSUPPORTED_KEYS[key]}) is not supported by Runyard; "
                "remove it to serve this project"
            )
        if key not in SERVED_KEYS and key not in IMAGE_KEYS:
            raise ConfigError(f"{path}: unknown key '{key}' (not part of LangGraph's config)")
    for section, known in SECTION_KEYS.items():
        value = raw.get(section)
        if not isinstance(value, dict):
            continue
        refuse_unknown_keys(path, section, value, known)
        for key in value:
            if (section, key) in REFUSED_SUB_KEYS:
                raise ConfigError(
                    f"{path}: {section}.{key} is refused: {REFUSED_SUB_KEYS[section, key]}; "
                    "remove it to serve this project"
                )
    _check_store_keys(path, raw.get("store"))
    if isinstance(raw.get("http"), dict):
        parse_http(str(path), raw["http"])


def _check_store_keys(path: Path, store: Any) -> None:
    """Refuse a key inside `store.index` or `store.ttl` that would otherwise be dropped."""
    if not isinstance(store, dict):
        return
    for part, known in STORE_SUB_KEYS.items():
        value = store.get(part)
        if isinstance(value, dict):
            refuse_unknown_keys(path, f"store.{part}", value, known)


def _parse_graph(path: Path, base: Path, graph_id: str, spec: Any) -> GraphSpec:
    description = None
    if isinstance(spec, dict):
        description = spec.get("description")
        spec = spec.get("path")
    if not isinstance(spec, str) or ":" not in spec:
        raise ConfigError(
            f"{path}: graph {graph_id!r} must be 'path/to/file.py:attribute' or "
            f"'package.module:attribute', got {spec!r}"
        )
    if description is not None and not isinstance(description, str):
        raise ConfigError(f"{path}: graph {graph_id!r}: 'description' must be a string")
    file_part, attribute = spec.rsplit(":", 1)
    if is_module_path(file_part):
        return GraphSpec(graph_id, None, attribute, description, module=file_part)
    return GraphSpec(graph_id, (base / file_part).resolve(), attribute, description)


def is_module_path(target: str) -> bool:
    """True for `package.module` (imported by name), False for a file path.

    As LangGraph tells them apart: a path has a `/` (or, here, ends with `.py`).
    """
    return "/" not in target and "\\" not in target and not target.endswith(".py")


def _parse_env(path: Path, base: Path, env: Any) -> dict[str, str]:
    if env is None:
        return {}
    if isinstance(env, dict):
        return {str(k): str(v) for k, v in env.items()}
    if isinstance(env, str):
        from dotenv import dotenv_values

        env_file = (base / env).resolve()
        if not env_file.is_file():
            # The official templates declare `.env` and ship only `.env.example`; LangGraph's
            # server starts without the file, and so does Runyard, saying so.
            log.warning(
                "env_file_missing path=%s config=%s variables come from the environment only",
                env_file,
                path,
            )
            return {}
        return {k: v for k, v in dotenv_values(env_file).items() if v is not None}
    raise ConfigError(f"{path}: 'env' must be a file path or an object")


def _parse_ui(path: Path, base: Path, ui: Any) -> dict[str, str]:
    """`ui`: graph id -> a component module inside the project folder, as LangGraph reads it."""
    if ui is None:
        return {}
    if not isinstance(ui, dict):
        raise ConfigError(f"{path}: 'ui' must map graph ids to component files ('./src/ui.tsx')")
    for graph_id, target in ui.items():
        if not isinstance(target, str) or not target:
            raise ConfigError(f"{path}: ui.{graph_id} must be a file path such as './src/ui.tsx'")
        file = (base / target).resolve()
        if not file.is_relative_to(base.resolve()):
            # The bundler refuses it too (its entry point is resolved inside the project).
            raise ConfigError(f"{path}: ui.{graph_id} ({target}) must be inside {base}")
        if not file.is_file():
            raise ConfigError(f"{path}: ui.{graph_id}: {file} does not exist")
    return dict(ui)


def _parse_ui_shared(path: Path, ui_config: dict[str, Any] | None) -> list[str]:
    shared = (ui_config or {}).get("shared", [])
    if not isinstance(shared, list) or not all(isinstance(name, str) for name in shared):
        raise ConfigError(f"{path}: ui_config.shared must be a list of package names")
    return list(shared)


def _optional_object(path: Path, raw: dict[str, Any], key: str) -> dict[str, Any] | None:
    value = raw.get(key)
    if value is not None and not isinstance(value, dict):
        raise ConfigError(f"{path}: {key!r} must be an object")
    return value


def apply_environment(config: ProjectConfig) -> None:
    """Make local dependencies importable and export the config's env (never overriding)."""
    for dep in config.dependencies:
        candidate = (config.project_dir / dep).resolve()
        if candidate.is_dir() and str(candidate) not in sys.path:
            sys.path.insert(0, str(candidate))
    for key, value in config.env.items():
        os.environ.setdefault(key, value)
