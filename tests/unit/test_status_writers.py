"""Only the lifecycle writes a run's or a thread's status (issue 34).

runyard/lifecycle/machine.py is the run state machine; runyard/lifecycle/creation.py
(creating a run), runyard/lifecycle/stops.py (cancels, strategies and deletions) and
runyard/lifecycle/endings.py (what follows a committed end) are parts of it that it builds and
owns, and nothing but machine.py and its other parts imports them. Every other module of the
package, outside db/ (where the statements are), may neither use a db function that writes a
status nor build a row with a "status" key for db/, nor touch the runs and threads tables
themselves. The test walks the package with `ast`; a new writer anywhere else fails it.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "runyard"
LIFECYCLE = "runyard/lifecycle/machine.py"
# Modules of the lifecycle: it builds and owns them, and alone imports them.
LIFECYCLE_PARTS = (
    "runyard/lifecycle/creation.py",
    "runyard/lifecycle/endings.py",
    "runyard/lifecycle/stops.py",
)
DB = "runyard/db/"
# The db functions that write a run's or a thread's status (or insert a row carrying one).
WRITERS: dict[str, frozenset[str]] = {
    "runyard.db.runs": frozenset(
        {
            "insert_run",
            "insert_run_on_new_thread",
            "interrupt_pending_run",
            "fail_unclaimed_run",
        }
    ),
    "runyard.db.run_claims": frozenset({"claim_run"}),
    "runyard.db.run_attempts": frozenset({"finish_run", "finish_run_with_state", "release_run"}),
    "runyard.db.run_recovery": frozenset({"requeue_expired"}),
    "runyard.db.threads": frozenset(
        {
            "insert_thread",
            "mark_busy",
            "set_state_fields",
            "state_statement",
            "settle_status",
        }
    ),
}
# Inserts whose row carries the status (given by the caller, not named in the statement).
INSERTS = {"insert_run", "insert_run_on_new_thread", "insert_thread"}
TABLES = "runyard.db.tables"
STATUS_TABLES = {"runs", "threads"}


def name_of(path: Path) -> str:
    if not path.is_relative_to(PACKAGE.parent):
        return path.name
    return path.relative_to(PACKAGE.parent).as_posix()


def module_of(path: Path) -> str:
    return name_of(path).removesuffix(".py").replace("/", ".")


def package_modules() -> Iterator[Path]:
    yield from sorted(PACKAGE.rglob("*.py"))


def db_names(tree: ast.Module) -> tuple[dict[str, str], dict[str, tuple[str, str]]]:
    """What a module's imports bind: names of db modules (alias → module) and names of
    db functions or tables (name → (module, attribute))."""
    modules: dict[str, str] = {}
    members: dict[str, tuple[str, str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                bound = alias.asname or alias.name
                full = f"{node.module}.{alias.name}"
                if full in WRITERS or full == TABLES:
                    modules[bound] = full
                elif node.module in WRITERS or node.module == TABLES:
                    members[bound] = (node.module, alias.name)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in WRITERS or alias.name == TABLES:
                    modules[alias.asname or alias.name] = alias.name
    return modules, members


def writes_in(path: Path) -> list[str]:
    """Where a module uses a status writer of db/, or the runs and threads tables."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    modules, members = db_names(tree)
    found = []

    def wrong(module: str, attribute: str) -> bool:
        if module == TABLES:
            return attribute in STATUS_TABLES
        return attribute in WRITERS[module]

    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            module = modules.get(node.value.id)
            if module is not None and wrong(module, node.attr):
                found.append(f"{name_of(path)}:{node.lineno}: {module}.{node.attr}")
        elif isinstance(node, ast.Name) and node.id in members:
            module, attribute = members[node.id]
            if wrong(module, attribute):
                found.append(f"{name_of(path)}:{node.lineno}: {module}.{attribute}")
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == TABLES:
            for alias in node.names:
                if alias.name in STATUS_TABLES:
                    found.append(f"{name_of(path)}:{node.lineno}: imports {TABLES}.{alias.name}")
    return sorted(set(found))


def is_status_row(node: ast.AST) -> bool:
    return isinstance(node, ast.Dict) and any(
        isinstance(key, ast.Constant) and key.value == "status" for key in node.keys
    )


def status_rows_for_db(path: Path) -> list[str]:
    """Dicts with a "status" key that a module hands to a function of db/: given in the
    call, or bound to a name (in the same function) that the call is given."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    modules, members = db_names(tree)
    db_aliases = set(modules)
    db_functions = set(members)
    for node in ast.walk(tree):
        # Any db module counts here, not only the ones with status writers.
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                bound = alias.asname or alias.name
                if node.module == "runyard.db":
                    db_aliases.add(bound)
                elif node.module.startswith("runyard.db."):
                    db_functions.add(bound)
    found = []
    scopes = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
    for scope in [tree, *scopes]:
        rows = {
            target.id
            for node in ast.walk(scope)
            if isinstance(node, ast.Assign) and is_status_row(node.value)
            for target in node.targets
            if isinstance(target, ast.Name)
        }
        for node in ast.walk(scope):
            if not isinstance(node, ast.Call):
                continue
            function = node.func
            to_db = (
                isinstance(function, ast.Attribute)
                and isinstance(function.value, ast.Name)
                and function.value.id in db_aliases
            ) or (isinstance(function, ast.Name) and function.id in db_functions)
            if not to_db:
                continue
            for argument in [*node.args, *(keyword.value for keyword in node.keywords)]:
                if is_status_row(argument) or (
                    isinstance(argument, ast.Name) and argument.id in rows
                ):
                    found.append(f"{name_of(path)}:{node.lineno}: a row with a status to db/")
    return sorted(set(found))


def outside_the_lifecycle() -> list[Path]:
    allowed = {LIFECYCLE, *LIFECYCLE_PARTS}
    return [
        path
        for path in package_modules()
        if name_of(path) not in allowed and not name_of(path).startswith(DB)
    ]


def test_only_the_lifecycle_calls_the_status_writers_of_db() -> None:
    found = [line for path in outside_the_lifecycle() for line in writes_in(path)]
    assert found == [], "write statuses through runyard/lifecycle/machine.py (RunLifecycle)"


def test_no_module_outside_the_lifecycle_hands_db_a_row_with_a_status() -> None:
    found = [line for path in outside_the_lifecycle() for line in status_rows_for_db(path)]
    assert found == [], "let the lifecycle give new rows their status"


def test_the_lifecycle_parts_are_imported_by_the_lifecycle_alone() -> None:
    parts = {part.removesuffix(".py").replace("/", ".") for part in LIFECYCLE_PARTS}
    found = []
    for path in package_modules():
        if name_of(path) == LIFECYCLE:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            imported: list[str] = []
            if isinstance(node, ast.ImportFrom) and node.module:
                imported = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            elif isinstance(node, ast.Import):
                imported = [alias.name for alias in node.names]
            if parts & set(imported) and module_of(path) not in parts:
                found.append(f"{name_of(path)}:{node.lineno}")
    assert found == [], "only runyard/lifecycle/machine.py imports the lifecycle's parts"


def status_writing_functions(module: str) -> set[str]:
    """The functions of a db module that write a status column: an UPDATE's `.values(status=
    …)`, or a use of another such function (of this module or another listed one)."""
    trees = {
        name: ast.parse((PACKAGE.parent / f"{name.replace('.', '/')}.py").read_text("utf-8"))
        for name in WRITERS
    }
    functions = {
        (name, node.name): node
        for name, tree in trees.items()
        for node in tree.body
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    }
    aliases = {name: db_names(tree)[0] for name, tree in trees.items()}
    writing = {
        key
        for key, node in functions.items()
        if any(
            isinstance(call, ast.Call)
            and isinstance(call.func, ast.Attribute)
            and call.func.attr == "values"
            and any(keyword.arg == "status" for keyword in call.keywords)
            for call in ast.walk(node)
        )
    }
    while True:
        more = set(writing)
        for (name, function), node in functions.items():
            for used in ast.walk(node):
                if isinstance(used, ast.Name) and (name, used.id) in writing:
                    more.add((name, function))
                elif isinstance(used, ast.Attribute) and isinstance(used.value, ast.Name):
                    other = aliases[name].get(used.value.id)
                    if other is not None and (other, used.attr) in writing:
                        more.add((name, function))
        if more == writing:
            break
        writing = more
    return {function for name, function in writing if name == module}


def test_every_status_writer_of_db_is_listed() -> None:
    for module, listed in WRITERS.items():
        public = {name for name in status_writing_functions(module) if not name.startswith("_")}
        assert public - listed == set(), f"add these to WRITERS[{module!r}]"
        assert listed - public - INSERTS == set(), f"these no longer write a status ({module})"


def test_the_walk_finds_a_writer_outside_the_lifecycle(tmp_path: Path) -> None:
    service = tmp_path / "service.py"
    service.write_text(
        "from runyard.db import threads as threads_db\n"
        "from runyard.db.runs import insert_run\n"
        "from runyard.db.tables import runs\n"
        "async def create(session, thread_id):\n"
        "    row = {'thread_id': thread_id, 'status': 'idle'}\n"
        "    await threads_db.insert_thread(session, row)\n"
        "    await threads_db.mark_busy(session, thread_id, {}, {})\n"
        "    await insert_run(session, {'status': 'pending'})\n",
        encoding="utf-8",
    )
    assert writes_in(service) == [
        "service.py:3: imports runyard.db.tables.runs",
        "service.py:6: runyard.db.threads.insert_thread",
        "service.py:7: runyard.db.threads.mark_busy",
        "service.py:8: runyard.db.runs.insert_run",
    ]
    assert status_rows_for_db(service) == [
        "service.py:6: a row with a status to db/",
        "service.py:8: a row with a status to db/",
    ]
