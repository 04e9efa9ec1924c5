"""No module reads a private name of another package: an attribute starting with one
underscore on anything but `self`, `cls` or a module of Runyard, a `getattr` of such a name,
or an import of one. The handlers langgraph-sdk's `Auth`, `Priority` and `Encryption` keep
only in private attributes are read in one adapter, `runyard/sdk_handlers.py`, and the test
lists those reads so that a new one is a visible change."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "runyard"
ADAPTER = "runyard/sdk_handlers.py"

# Underscored names their libraries document as public API; the underscore only keeps them
# clear of the names of a row's columns or a tuple's fields.
DOCUMENTED_PUBLIC = {
    # SQLAlchemy's `Row._mapping`: the documented mapping view of a row (the `Row` reference
    # and the 2.0 tutorial, "Selecting Rows": "use the Row._mapping accessor").
    "_mapping",
    # `namedtuple._replace` (Python's collections documentation); used on langgraph's
    # NamedTuples (`PutOp`, `SearchOp`, `CheckpointTuple`).
    "_replace",
}

# What the adapter reads, each with its reason beside it there.
ADAPTER_READS = {
    "auth._authenticate_handler",
    "auth._handlers",
    "auth._global_handlers",
    "priority._assign_handler",
    "encryption._blob_encryptor",
    "encryption._blob_decryptor",
    "encryption._context_handler",
}

ATTRIBUTE_FUNCTIONS = {"getattr", "hasattr", "setattr", "delattr"}


def is_private(name: str) -> bool:
    """`_name`, not `__dunder__` (a protocol name) nor `__mangled` (a class's own)."""
    return name.startswith("_") and not name.startswith("__")


def runyard_names(tree: ast.Module) -> set[str]:
    """The names a module binds to Runyard's own modules (and what it imports from them)."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "runyard":
                    names.add(alias.asname or "runyard")
        elif isinstance(node, ast.ImportFrom) and (node.level or 0) == 0 and node.module:
            if node.module.split(".")[0] == "runyard":
                names.update(alias.asname or alias.name for alias in node.names)
    return names


def private_reads(source: str) -> list[tuple[int, str]]:
    """`(line, what)` of each private name of another package the source reads."""
    tree = ast.parse(source)
    own = {"self", "cls"} | runyard_names(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and is_private(node.attr):
            if node.attr in DOCUMENTED_PUBLIC:
                continue
            if isinstance(node.value, ast.Name) and node.value.id in own:
                continue
            found.append((node.lineno, ast.unparse(node)))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            if node.func.id in ATTRIBUTE_FUNCTIONS and len(node.args) >= 2:
                name = node.args[1]
                if isinstance(name, ast.Constant) and isinstance(name.value, str):
                    if is_private(name.value) and name.value not in DOCUMENTED_PUBLIC:
                        found.append((node.lineno, ast.unparse(node)))
        elif isinstance(node, ast.ImportFrom) and (node.level or 0) == 0 and node.module:
            if node.module.split(".")[0] == "runyard":
                continue
            parts = node.module.split(".") + [alias.name for alias in node.names]
            if any(is_private(part) for part in parts):
                found.append((node.lineno, f"from {node.module} import ..."))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if any(is_private(part) for part in alias.name.split(".")):
                    found.append((node.lineno, f"import {alias.name}"))
    return found


def reads_by_module() -> dict[str, list[tuple[int, str]]]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE.parent).as_posix()
        reads = private_reads(path.read_text(encoding="utf-8"))
        if reads:
            found[relative] = reads
    return found


def test_no_private_name_of_another_package_is_read_outside_the_adapter() -> None:
    outside = [
        f"{module}:{line}: {what}"
        for module, reads in reads_by_module().items()
        if module != ADAPTER
        for line, what in reads
    ]
    assert outside == []


def test_the_adapter_reads_only_the_listed_sdk_attributes() -> None:
    assert {what for _, what in reads_by_module().get(ADAPTER, [])} == ADAPTER_READS


def test_the_check_finds_each_kind_of_private_read() -> None:
    source = (
        "import langgraph._internal\n"
        "from langgraph_sdk.auth import _register_handler\n"
        "from langgraph._internal._config import merge\n"
        "handler = auth._authenticate_handler\n"
        "pool = saver.conn._pool\n"
        "found = getattr(priority, '_assign_handler')\n"
        "logger._runyard = True\n"
    )
    assert [line for line, _ in private_reads(source)] == [1, 2, 3, 4, 5, 6, 7]


def test_the_check_leaves_own_and_documented_names_alone() -> None:
    source = (
        "from __future__ import annotations\n"
        "from runyard.db import runs\n"
        "import runyard.project.config as config\n"
        "class Store:\n"
        "    def get(self):\n"
        "        return self._pool, type(self).__name__, self.__class__\n"
        "    @classmethod\n"
        "    def make(cls):\n"
        "        return cls._default\n"
        "mapping = row._mapping\n"
        "op = op._replace(index=False)\n"
        "table = runs._table, config._loaded\n"
        "name = getattr(handler, '__qualname__', None)\n"
    )
    assert private_reads(source) == []
