"""Imports user code named as `path/to/file.py:attribute` (graphs, auth, embeddings)."""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from runyard.domain.errors import ConfigError


def import_attribute(file: Path, attribute: str, namespace: str, what: str) -> Any:
    """Import `file` as a module and return its `attribute`.

    A file inside a package (its folder has an `__init__.py`) is imported by its dotted name
    from the package root, as its project imports it: `app/graph.py` is `app.graph`, so
    `from app.tools import x` and `from .tools import x` both work and the package is loaded
    once. A loose file is imported under a private name with its folder on `sys.path`, so
    sibling modules resolve. Errors are ConfigError messages starting with `what` and naming
    the file, the attribute and the cause.
    """
    if not file.is_file():
        raise ConfigError(f"{what}: file {file} does not exist")
    file = file.resolve()
    try:
        dotted = package_module_name(file)
        if dotted is not None:
            module = _import_from_package(file, *dotted)
        else:
            module = _import_loose_file(file, namespace)
    except ConfigError:
        raise
    except (Exception, SystemExit) as exc:
        # SystemExit too: a module that calls sys.exit() for a missing API key is a broken
        # graph file like any other, not a reason to print a traceback.
        raise ConfigError(f"{what}: importing {file}:{attribute} failed: {one_line(exc)}") from exc
    if not hasattr(module, attribute):
        raise ConfigError(
            f"{what}: {file}:{attribute} not found ({file.name} has no attribute {attribute!r})"
        )
    return getattr(module, attribute)


def package_module_name(file: Path) -> tuple[Path, str] | None:
    """(package root, dotted name) of a file inside a regular package, else None.

    The root is the first folder upwards without an `__init__.py`, the rule pytest and
    `python -m` users rely on; a name part that is not an identifier means no package.
    """
    folder = file.parent
    if not (folder / "__init__.py").is_file():
        return None
    parts = [] if file.name == "__init__.py" else [file.stem]
    while (folder / "__init__.py").is_file():
        parts.insert(0, folder.name)
        folder = folder.parent
    if not all(part.isidentifier() for part in parts):
        return None
    return folder, ".".join(parts)


def _import_from_package(file: Path, root: Path, name: str) -> ModuleType:
    top = name.split(".", 1)[0]
    loaded = sys.modules.get(top)
    if loaded is not None and not _is_under(loaded, root / top):
        where = getattr(loaded, "__file__", None) or "elsewhere"
        raise ConfigError(
            f"{file} is module {name!r} of package {top!r} in {root}, but {top!r} is already "
            f"imported from {where}; rename one of the two packages"
        )
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    return importlib.import_module(name)


def _is_under(module: ModuleType, folder: Path) -> bool:
    paths = list(getattr(module, "__path__", None) or [])
    if getattr(module, "__file__", None):
        paths.append(str(Path(str(module.__file__)).parent))
    return any(Path(p).resolve() == folder.resolve() for p in paths)


def _import_loose_file(file: Path, namespace: str) -> ModuleType:
    digest = hashlib.sha1(str(file).encode()).hexdigest()[:10]
    module_name = f"{namespace}.{file.stem}_{digest}"
    spec = importlib.util.spec_from_file_location(module_name, file)
    if spec is None or spec.loader is None:
        raise ImportError("not a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    folder = str(file.parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(module_name, None)
        raise
    return module


def import_module_attribute(module_name: str, attribute: str, what: str) -> Any:
    """Import `package.module` by name (from the dependencies on sys.path) and return its
    `attribute`; errors are ConfigError messages like import_attribute's."""
    try:
        module = importlib.import_module(module_name)
    except (Exception, SystemExit) as exc:
        raise ConfigError(
            f"{what}: importing module {module_name} failed: {one_line(exc)} "
            "(is its folder listed in 'dependencies', or the package installed?)"
        ) from exc
    if not hasattr(module, attribute):
        raise ConfigError(
            f"{what}: {module_name}:{attribute} not found (module {module_name} has no "
            f"attribute {attribute!r})"
        )
    return getattr(module, attribute)


def one_line(exc: BaseException) -> str:
    """`Type: message` on one line: a start-up failure is reported as a single log line, and
    some messages (pydantic's validation errors) span several."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return f"{type(exc).__name__}: {'; '.join(lines)}" if lines else type(exc).__name__
