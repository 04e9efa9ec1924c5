"""Imports user code named as `path/to/file.py:attribute` (graphs, auth, embeddings)."""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
from pathlib import Path
from typing import Any

from runyard.domain.errors import ConfigError


def import_attribute(file: Path, attribute: str, namespace: str, what: str) -> Any:
    """Import `file` as a module and return its `attribute`.

    Errors are ConfigError messages starting with `what` and naming the file, the attribute
    and the cause. The file's folder becomes importable so sibling modules resolve.
    """
    if not file.is_file():
        raise ConfigError(f"{what}: file {file} does not exist")
    digest = hashlib.sha1(str(file).encode()).hexdigest()[:10]
    module_name = f"{namespace}.{file.stem}_{digest}"
    try:
        spec = importlib.util.spec_from_file_location(module_name, file)
        if spec is None or spec.loader is None:
            raise ImportError("not a Python module")
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        folder = str(file.parent)
        if folder not in sys.path:
            sys.path.insert(0, folder)
        spec.loader.exec_module(module)
    except Exception as exc:
        sys.modules.pop(module_name, None)
        raise ConfigError(
            f"{what}: importing {file}:{attribute} failed: {type(exc).__name__}: {exc}"
        ) from exc
    if not hasattr(module, attribute):
        raise ConfigError(
            f"{what}: {file}:{attribute} not found ({file.name} has no attribute {attribute!r})"
        )
    return getattr(module, attribute)


def import_module_attribute(module_name: str, attribute: str, what: str) -> Any:
    """Import `package.module` by name (from the dependencies on sys.path) and return its
    `attribute`; errors are ConfigError messages like import_attribute's."""
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:
        raise ConfigError(
            f"{what}: importing module {module_name} failed: {type(exc).__name__}: {exc} "
            "(is its folder listed in 'dependencies', or the package installed?)"
        ) from exc
    if not hasattr(module, attribute):
        raise ConfigError(
            f"{what}: {module_name}:{attribute} not found (module {module_name} has no "
            f"attribute {attribute!r})"
        )
    return getattr(module, attribute)
