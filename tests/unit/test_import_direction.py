"""Imports point one way: from the entry layers (api, worker, background) through services and
the lifecycle to storage, transport and graphs, and down to domain; the composition root
(wiring/, where runtime.py is) and the entry points above everything. The test reads every
module's imports, type-only ones included, and fails on one that points up. Nothing below the
composition root imports `runyard.wiring.runtime`: services, the routes and the worker are
built from the parts they use."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "runyard"

# Each part of the package (a subpackage, or a top-level module) and its layer: a part may
# import only parts of lower layers.
LAYERS: dict[str, int] = {
    "__version__": 0,
    "domain": 0,
    "loops": 0,
    # Calls into the event loop from the threads LangGraph runs synchronous code on.
    "loop_calls": 0,
    # The console's part of the settings.
    "db": 1,
    # Settings parse with domain code (the group caps of RUNYARD_GROUP_LIMITS).
    "settings": 1,
    "streaming": 1,
    "outbound": 1,
    "schemas": 1,
    "sdk_handlers": 1,
    # The public module graphs import (at-most-once tools): only domain below it.
    "tools": 1,
    "queue": 2,
    "encryption": 2,
    "migrations": 2,
    # langgraph.json and env, the user code and the UI bundles it names.
    "project": 3,
    # The checkpoint savers per backend.
    "checkpoints": 3,
    "observability": 3,
    # The long-term store, which loads its embeddings from the project and shares the
    # checkpoints' psycopg pools.
    "longterm_store": 4,
    # Running a graph: the registry reads the project.
    "graphs": 4,
    "deploy": 4,
    # The run state machine: machine.py and the parts it builds (creation, stops, endings,
    # transactions).
    "lifecycle": 5,
    "services": 6,
    "auth": 7,
    "worker": 7,
    "background": 7,
    "api": 8,
    # The operator console's page and JSON API, an entry layer beside api/.
    "console": 8,
    # The composition root: the runtime, its phases' builders and the transport it opens.
    "wiring": 9,
    # The entry points: the app factory and the uvicorn server.
    "app": 10,
    "cli": 11,
}


def part_of(module: str) -> str:
    """`runyard.db.runs` → `db`; `runyard.settings` → `settings`."""
    return module.split(".")[1]


def imports_against_the_direction() -> list[str]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE.parent).with_suffix("").as_posix()
        if relative == "runyard/__init__":
            continue
        source = part_of(relative.replace("/", "."))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                if node.module == "runyard":
                    targets = [f"runyard.{alias.name}" for alias in node.names]
                elif node.module.startswith("runyard."):
                    targets = [node.module]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names if a.name.startswith("runyard.")]
            for target in targets:
                part = part_of(target)
                if part == source:
                    continue
                if part not in LAYERS or source not in LAYERS:
                    found.append(f"{relative}:{node.lineno}: {target} (a part with no layer)")
                elif LAYERS[part] >= LAYERS[source]:
                    found.append(f"{relative}:{node.lineno}: {source} imports {target}")
    return found


def test_imports_point_down_the_layers() -> None:
    assert imports_against_the_direction() == []


def module_imports() -> dict[str, set[str]]:
    """Each module of the package and the package's modules it imports, type-only included."""
    paths = {}
    for path in PACKAGE.rglob("*.py"):
        name = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        paths[name.removesuffix(".__init__")] = path
    graph: dict[str, set[str]] = {name: set() for name in paths}
    for name, path in paths.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
            elif isinstance(node, ast.Import):
                found = [alias.name for alias in node.names]
            else:
                continue
            graph[name].update(target for target in found if target in paths and target != name)
    return graph


def import_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The groups of modules that import one another, directly or through others."""
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles = []

    def visit(module: str) -> None:
        order[module] = low[module] = len(order)
        stack.append(module)
        for target in sorted(graph[module]):
            if target not in order:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in stack:
                low[module] = min(low[module], order[target])
        if low[module] == order[module]:
            group = stack[stack.index(module) :]
            del stack[stack.index(module) :]
            if len(group) > 1:
                circles.append(sorted(group))

    for module in sorted(graph):
        if module not in order:
            visit(module)
    return circles


def test_no_import_circle() -> None:
    assert import_circles(module_imports()) == []


def test_the_check_finds_a_circle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert import_circles(graph) == [["a", "b", "c"]]


def test_every_part_has_a_layer() -> None:
    parts = {p.stem for p in PACKAGE.iterdir() if p.suffix == ".py" and p.stem != "__init__"}
    parts |= {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()}
    assert parts - set(LAYERS) == set()
