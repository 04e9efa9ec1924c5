"""`runyard validate`: a config file read as the server reads it, and every path it names
checked, without importing anything (a graph module may need an API key to import).

A path `file.py:attribute` must name a file that exists and defines `attribute` at its top
level; a local dependency must be a folder; an `env` file that is missing is a warning, as
the server starts without it.
"""

from __future__ import annotations

import ast
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runyard.domain.errors import ConfigError
from runyard.project.config import is_module_path, load_config

# The keys whose value (or `path`) is a `file.py:attribute` to load.
PATH_KEYS = (
    ("auth", "path"),
    ("encryption", "path"),
    ("priority", "path"),
    ("http", "app"),
    ("checkpointer", "path"),
    ("store", "path"),
)


@dataclass
class Findings:
    """What the check found: problems (the config would not serve) and warnings."""

    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    graphs: list[str] = field(default_factory=list)


def check_config(path: Path) -> Findings:
    """Every problem of the config file at `path`, not only the first."""
    found = Findings()
    try:
        raw = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        found.problems.append(f"cannot read {path}: {exc}")
        return found
    if not isinstance(raw, dict):
        found.problems.append(f"{path}: the top level must be a JSON object")
        return found
    try:
        found.graphs = list(load_config(path).graphs)
    except ConfigError as exc:
        found.problems.append(str(exc))
    base = path.parent
    graphs = raw.get("graphs")
    for graph_id, spec in (graphs or {}).items() if isinstance(graphs, dict) else ():
        target = spec.get("path") if isinstance(spec, dict) else spec
        _check_target(found, base, f"graph {graph_id!r}", target)
    for section, key in PATH_KEYS:
        value = raw.get(section)
        if isinstance(value, dict) and isinstance(value.get(key), str):
            _check_target(found, base, f"{section}.{key}", value[key])
    _check_embed(found, base, raw.get("store"))
    _check_files(found, base, raw)
    found.problems = list(dict.fromkeys(found.problems))
    return found


def _check_target(found: Findings, base: Path, what: str, target: Any) -> None:
    """A `path/to/file.py:attribute` must exist and define the attribute."""
    if not isinstance(target, str) or ":" not in target:
        return  # load_config reports the shape
    file_part, attribute = target.rsplit(":", 1)
    if is_module_path(file_part):
        return  # imported by name: only importing it would tell
    file = (base / file_part).resolve()
    if not file.is_file():
        found.problems.append(f"{what}: {file_part} does not exist (looked for {file})")
        return
    try:
        tree = ast.parse(file.read_text(encoding="utf-8"))
    except (SyntaxError, UnicodeDecodeError, OSError) as exc:
        found.problems.append(f"{what}: {file_part} cannot be read as Python ({exc})")
        return
    if attribute not in _top_level_names(tree) and not _imports_everything(tree):
        found.problems.append(f"{what}: {file_part} defines no {attribute!r} at its top level")


def _top_level_names(tree: ast.Module) -> set[str]:
    return _names_in(tree.body)


def _names_in(body: list[ast.stmt]) -> set[str]:
    """Names a block of statements binds, those under `if`, `try` and `with` included."""
    names: set[str] = set()
    for node in body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                names |= {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, ast.If | ast.Try | ast.With):
            inner = [getattr(node, part, []) for part in ("body", "orelse", "finalbody")]
            inner += [handler.body for handler in getattr(node, "handlers", [])]
            names |= _names_in([stmt for block in inner for stmt in block])
    return names


def _imports_everything(tree: ast.Module) -> bool:
    return any(
        isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names)
        for node in tree.body
    )


def _check_embed(found: Findings, base: Path, store: Any) -> None:
    index = store.get("index") if isinstance(store, dict) else None
    embed = index.get("embed") if isinstance(index, dict) else None
    if isinstance(embed, str) and ".py:" in embed:
        _check_target(found, base, "store.index.embed", embed)


def _check_files(found: Findings, base: Path, raw: dict[str, Any]) -> None:
    """Local dependencies, the pip config file and the env file."""
    for dependency in raw.get("dependencies") or []:
        if isinstance(dependency, str) and dependency.startswith((".", "/")):
            folder = (base / dependency).resolve()
            if not folder.is_dir():
                found.problems.append(f"dependency {dependency}: {folder} is not a folder")
    pip_config = raw.get("pip_config_file")
    if isinstance(pip_config, str) and not (base / pip_config).is_file():
        found.problems.append(f"pip_config_file: {base / pip_config} does not exist")
    env = raw.get("env")
    if isinstance(env, str) and not (base / env).is_file():
        found.warnings.append(
            f"env: {base / env} does not exist; the server starts without it, with the "
            "variables of its environment only"
        )
