"""Run and thread statuses are compared as enums, never as strings (issue 34).

runyard/domain/status.py defines RunStatus and ThreadStatus and the sets of them. Anywhere
else in the package (the migrations aside: each is one revision, written once), a status
word ("pending", "running", "success", "error", "timeout", "interrupted", "idle", "busy") may
not be written as a string literal where it stands for a status:

- compared (`==`, `!=`, `is`, `is not`, or `in`/`not in` a tuple, set or list of literals, or
  SQLAlchemy's `.in_()`/`.not_in()`) with an expression that names a status: a name or an
  attribute `status` or `*_status`, or a `"status"` key (`run["status"]`,
  `row.get("status")`, `runs.c.status`);
- anywhere in the value of a `"status"` key of a dict literal or of a `status=` keyword
  (`case((busy, "busy"), else_="idle")` included);
- anywhere in the value assigned to something that names a status;
- an argument of a call of something that names a status (`threads_db.settle_status(s, id,
  "idle")`).

The same words mean other things too (an SSE event named "error", an "error" key, a log
entry ending a run): compared with something that does not name a status, they are left
alone. Modules still to be converted are listed with their reason; the list may only shrink,
so a listed module that is clean fails the test until it is struck out.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path
from typing import get_args

from runyard.domain.status import ACTIVE_RUN_STATUSES, RunStatus, ThreadStatus
from runyard.schemas.runs import CancelMany
from runyard.schemas.threads import ThreadStatusName

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "runyard"
EXEMPT = (PACKAGE / "migrations", PACKAGE / "domain" / "status.py")
WORDS = frozenset({*RunStatus, *ThreadStatus})
STATUS_NAME = re.compile(r"(^|_)status$")

# Modules still holding status literals, each with the reason.
TO_CONVERT: dict[str, str] = {}


def is_word(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in WORDS


def names_status(node: ast.AST) -> bool:
    """Whether an expression names a status: `status`, `x.run_status`, `row["status"]`..."""
    for part in ast.walk(node):
        if isinstance(part, ast.Name) and STATUS_NAME.search(part.id):
            return True
        if isinstance(part, ast.Attribute) and STATUS_NAME.search(part.attr):
            return True
        if isinstance(part, ast.Constant) and part.value == "status":
            return True
    return False


def words_in(node: ast.AST) -> Iterator[ast.Constant]:
    for part in ast.walk(node):
        if is_word(part):
            assert isinstance(part, ast.Constant)
            yield part


def compared(node: ast.Compare) -> Iterator[ast.Constant]:
    operands = [node.left, *node.comparators]
    for op, left, right in zip(node.ops, operands[:-1], operands[1:], strict=True):
        if isinstance(op, ast.Eq | ast.NotEq | ast.Is | ast.IsNot):
            for word, other in ((left, right), (right, left)):
                if is_word(word) and names_status(other):
                    assert isinstance(word, ast.Constant)
                    yield word
        elif isinstance(op, ast.In | ast.NotIn):
            if isinstance(right, ast.Tuple | ast.Set | ast.List) and names_status(left):
                yield from (elt for elt in right.elts if isinstance(elt, ast.Constant))
            elif is_word(left) and names_status(right):
                assert isinstance(left, ast.Constant)
                yield left


def called(node: ast.Call) -> str:
    """The name a call calls (`settle_status` of `threads_db.settle_status(...)`), or ""."""
    if isinstance(node.func, ast.Attribute):
        return node.func.attr
    return node.func.id if isinstance(node.func, ast.Name) else ""


def status_literals(tree: ast.AST) -> set[ast.Constant]:
    """The status literals of a module, by the rule above."""
    found: set[ast.Constant] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            found.update(word for word in compared(node) if is_word(word))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr in {"in_", "not_in", "notin_"} and names_status(node.func.value):
                for arg in node.args:
                    found.update(words_in(arg))
        if isinstance(node, ast.Call) and STATUS_NAME.search(called(node)):
            for arg in node.args:
                found.update(words_in(arg))
        if isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=True):
                if isinstance(key, ast.Constant) and key.value == "status":
                    found.update(words_in(value))
        elif isinstance(node, ast.keyword) and node.arg == "status":
            found.update(words_in(node.value))
        elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if node.value is not None and any(names_status(target) for target in targets):
                found.update(words_in(node.value))
    return found


def modules() -> list[Path]:
    return [
        path
        for path in sorted(PACKAGE.rglob("*.py"))
        if not any(path == exempt or path.is_relative_to(exempt) for exempt in EXEMPT)
    ]


def name_of(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def literals_by_module() -> dict[str, list[str]]:
    """`line: 'word'` of every status literal, by module (modules without any left out)."""
    found: dict[str, list[str]] = {}
    for path in modules():
        words = status_literals(ast.parse(path.read_text(encoding="utf-8")))
        if words:
            ordered = sorted(words, key=lambda word: (word.lineno, word.col_offset))
            found[name_of(path)] = [f"{word.lineno}: {word.value!r}" for word in ordered]
    return found


def test_no_status_literal_outside_the_listed_modules() -> None:
    unlisted = {name: at for name, at in literals_by_module().items() if name not in TO_CONVERT}
    assert unlisted == {}, "use RunStatus / ThreadStatus members (runyard/domain/status.py)"


def test_every_listed_module_still_holds_a_status_literal() -> None:
    clean = sorted(set(TO_CONVERT) - set(literals_by_module()))
    assert clean == [], "strike these out of TO_CONVERT"


def test_every_listing_gives_its_reason_in_one_line() -> None:
    assert all(reason.strip() and "\n" not in reason for reason in TO_CONVERT.values())


SAMPLE = """
if run["status"] == "success": ...
if "busy" != thread.get("status"): ...
if status in ("pending", "running"): ...
if self.root_status is not "idle": ...
stmt = select(runs).where(runs.c.status.in_(["timeout"]))
row = {"run_id": run_id, "status": "error"}
update(threads).values(status=case((waiting, "busy"), else_="interrupted"))
thread_status = "idle" if done else other
row["status"] = "running"
await threads_db.settle_status(session, thread_id, "idle")
"""
LEFT_ALONE = """
if event.event == "error": ...
if command.get("type") == "error": ...
if name in ("error", "end"): ...
count = func.count().filter(runs.c.status == RunStatus.RUNNING).label("running")
payload = {"error": "error", "status": RunStatus.ERROR}
status = RunStatus.ERROR if failed else RunStatus.SUCCESS
if status == RunStatus.PENDING: ...
"""


def test_the_rule_finds_each_form_of_a_status_literal() -> None:
    found = sorted((word.lineno, word.value) for word in status_literals(ast.parse(SAMPLE)))
    assert found == [
        (2, "success"),
        (3, "busy"),
        (4, "pending"),
        (4, "running"),
        (5, "idle"),
        (6, "timeout"),
        (7, "error"),
        (8, "busy"),
        (8, "interrupted"),
        (9, "idle"),
        (10, "running"),
        (11, "idle"),
    ]


def test_the_rule_leaves_other_uses_of_the_words_alone() -> None:
    assert status_literals(ast.parse(LEFT_ALONE)) == set()


def test_the_wire_literals_name_the_enums_statuses() -> None:
    # The schemas keep Literal types (the OpenAPI contract); they must say what the enums say.
    assert set(get_args(ThreadStatusName)) == set(ThreadStatus)
    (cancel_filter, _none) = get_args(CancelMany.model_fields["status"].annotation)
    assert set(get_args(cancel_filter)) == {*ACTIVE_RUN_STATUSES, "all"}
