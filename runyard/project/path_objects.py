"""The one loader of the objects a project's config names by `path`: `auth.path`,
`encryption.path`, `priority.path` (and `http.app` when it names a file).

A path is `path/to/file.py:attribute`, relative to the config file's folder
(`ProjectConfig.project_dir`), as LangGraph resolves it, and to the working directory only
when there is no config file; the same base for every section, and for `dependencies`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from runyard.domain.errors import ConfigError
from runyard.project.modules import import_attribute

if TYPE_CHECKING:
    from runyard.project.config import ProjectConfig

T = TypeVar("T")


def declared_path(project: ProjectConfig, section: str) -> str | None:
    """`<section>.path` as the config writes it, checked for its shape; None when unset."""
    raw: dict[str, Any] = getattr(project, section) or {}
    path = raw.get("path")
    if not path:
        return None
    if not isinstance(path, str) or ":" not in path:
        raise ConfigError(f"{section}.path must be 'path/to/file.py:attribute', got {path!r}")
    return path


def project_file(project: ProjectConfig, file_part: str) -> Path:
    """A file the config names, from the config file's folder."""
    return (project.project_dir / file_part).resolve()


def load_path_object(project: ProjectConfig, section: str, kind: type[T]) -> tuple[T, str] | None:
    """The `kind` instance `<section>.path` names, imported, with the path as written; None
    when the section names none. ConfigError naming the section, the file and the cause
    when the path is malformed, the file or attribute missing, or the object not a `kind`."""
    path = declared_path(project, section)
    if path is None:
        return None
    file_part, attribute = path.rsplit(":", 1)
    file = project_file(project, file_part)
    found = import_attribute(file, attribute, f"runyard_{section}", f"{section}.path")
    if not isinstance(found, kind):
        raise ConfigError(
            f"{section}.path: {file}:{attribute} must be a {kind.__module__.split('.')[0]}."
            f"{kind.__name__} instance, got {type(found).__name__}"
        )
    return found, path
