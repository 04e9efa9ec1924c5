"""The build keys of `langgraph.json`, as the LangGraph CLI reads them for `build`."""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from runyard.domain.errors import ConfigError
from runyard.domain.webhook_policy import WebhookPolicy
from runyard.project.config import load_config

DEFAULT_PYTHON_VERSION = "3.11"
# As `langgraph build` defaults it.
DEFAULT_NODE_VERSION = "20"
MIN_PYTHON_VERSION = (3, 11)

DependencyKind = Literal["pip", "package", "requirements", "folder"]


@dataclass(frozen=True)
class Dependency:
    """One `dependencies` entry: a pip spec, or a local folder and how it is installed."""

    spec: str
    kind: DependencyKind
    # For local folders: the folder relative to the project, as a POSIX path ('.' for it).
    folder: str | None = None


@dataclass(frozen=True)
class BuildConfig:
    """What an image of the project needs (the project folder and the build keys), and what
    its deployments need besides (its variables, its webhook rules)."""

    config_file: Path
    python_version: str
    # langgraph.json's `base_image`: the default of the BASE_IMAGE build argument.
    base_image: str | None
    dependencies: list[Dependency]
    dockerfile_lines: list[str]
    pip_config_file: str | None
    # langgraph.json's "env" when it names a file: `runyard up` hands it to the instances.
    env_file: Path | None = None
    # Generative UI (`ui`, `ui_config.shared`), built at image time with Node.js `node_version`.
    ui: dict[str, str] = field(default_factory=dict)
    ui_shared: list[str] = field(default_factory=list)
    node_version: str = DEFAULT_NODE_VERSION
    # The project's variables as the server applies them ("env": a file's or inline).
    env: dict[str, str] = field(default_factory=dict)
    # `webhooks.url` as the server applies it: what the pods must be able to reach.
    webhook_policy: WebhookPolicy = field(default_factory=WebhookPolicy)

    def env_files_for(self, folder: Path) -> tuple[str, ...]:
        """The env file, relative to the deployment's `folder`, when it exists: a missing one
        is no error (as for `runyard dev`), the instances take no variables from it."""
        if self.env_file is None or not self.env_file.is_file():
            return ()
        return (os.path.relpath(self.env_file, folder),)

    @property
    def env_source(self) -> str:
        """Where the project's variables are written, for messages about one of them."""
        if self.env_file is not None:
            return str(self.env_file)
        return f'{self.config_file} ("env")'

    @property
    def project_dir(self) -> Path:
        """The folder of the config file: the build context, copied into the image."""
        return self.config_file.parent

    @property
    def project_name(self) -> str:
        """The project's name in the image (`/deps/<name>`), from its folder's name."""
        name = re.sub(r"[^A-Za-z0-9_.-]+", "-", self.project_dir.name).strip("-.")
        return name or "project"


def load_build_config(config_file: Path) -> BuildConfig:
    """Read and check the build keys; errors name the file, the key and what to change."""
    config_file = config_file.resolve()
    project = load_config(config_file)  # the graphs must be valid to be worth building
    raw: dict[str, Any] = json.loads(config_file.read_text())
    base = config_file.parent
    for spec in project.graphs.values():
        if spec.file is not None:  # a module path is imported from the dependencies
            _inside(config_file, base, spec.file, f"graph {spec.graph_id!r}")
    return BuildConfig(
        config_file=config_file,
        python_version=_python_version(config_file, raw.get("python_version")),
        base_image=_base_image(config_file, raw.get("base_image")),
        dependencies=[_dependency(config_file, base, dep) for dep in project.dependencies],
        dockerfile_lines=_lines(config_file, raw.get("dockerfile_lines")),
        pip_config_file=_pip_config(config_file, base, raw.get("pip_config_file")),
        env_file=(base / raw["env"]).resolve() if isinstance(raw.get("env"), str) else None,
        ui=project.ui,
        ui_shared=project.ui_shared,
        node_version=_node_version(config_file, raw.get("node_version")),
        env=project.env,
        webhook_policy=project.webhooks.policy(dev=False),
    )


def _python_version(config_file: Path, value: Any) -> str:
    if value is None:
        return DEFAULT_PYTHON_VERSION
    text = str(value)
    match = re.fullmatch(r"(\d+)\.(\d+)", text)
    if match is None:
        raise ConfigError(
            f"{config_file}: 'python_version' must look like '3.11' (major.minor), got {value!r}"
        )
    if (int(match.group(1)), int(match.group(2))) < MIN_PYTHON_VERSION:
        raise ConfigError(
            f"{config_file}: 'python_version' {text} is too old; Runyard needs 3.11 or newer"
        )
    return text


def _node_version(config_file: Path, value: Any) -> str:
    if value is None:
        return DEFAULT_NODE_VERSION
    text = str(value)
    if re.fullmatch(r"\d+", text) is None:
        raise ConfigError(
            f"{config_file}: 'node_version' must be a major version such as '20', got {value!r}"
        )
    return text


def _base_image(config_file: Path, value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip() or any(c.isspace() for c in value):
        raise ConfigError(f"{config_file}: 'base_image' must be an image name, got {value!r}")
    return value


def _lines(config_file: Path, value: Any) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(line, str) for line in value):
        raise ConfigError(f"{config_file}: 'dockerfile_lines' must be a list of strings")
    return list(value)


def _pip_config(config_file: Path, base: Path, value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise ConfigError(f"{config_file}: 'pip_config_file' must be a path")
    path = (base / value).resolve()
    if not path.is_file():
        raise ConfigError(f"{config_file}: pip_config_file {path} does not exist")
    return _inside(config_file, base, path, "pip_config_file")


def _dependency(config_file: Path, base: Path, spec: str) -> Dependency:
    if not spec.startswith((".", "/")):
        return Dependency(spec, "pip")
    folder = (base / spec).resolve()
    if not folder.is_dir():
        raise ConfigError(f"{config_file}: dependency {spec!r} is not a folder ({folder})")
    relative = _inside(config_file, base, folder, f"dependency {spec!r}")
    kind: DependencyKind
    if (folder / "pyproject.toml").is_file() or (folder / "setup.py").is_file():
        kind = "package"
    elif (folder / "requirements.txt").is_file():
        kind = "requirements"
    else:
        kind = "folder"
    return Dependency(spec, kind, relative)


def _inside(config_file: Path, base: Path, path: Path, what: str) -> str:
    try:
        return path.resolve().relative_to(base).as_posix()
    except ValueError:
        raise ConfigError(
            f"{config_file}: {what} ({path}) is outside the project folder {base}; the image "
            "holds the project folder only, so move it inside"
        ) from None
