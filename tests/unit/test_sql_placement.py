"""SQL text lives in `runyard/db/` (and the migrations): a statement written anywhere else
is a new writer nobody reviews with the others. The test reads every module's string
constants and fails on one that starts like a statement."""

from __future__ import annotations

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "runyard"
STATEMENT = re.compile(
    r"^\s*(SELECT|INSERT|UPDATE|DELETE|CREATE|ALTER|DROP|PRAGMA|ATTACH|WITH|TRUNCATE|VACUUM)\s"
)
SQL_HOMES = ("db/", "migrations/")


def statements_outside_db() -> list[str]:
    """`path:line: text` of each string constant that starts like SQL, outside db/."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).as_posix()
        if relative.startswith(SQL_HOMES):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                if STATEMENT.match(node.value):
                    found.append(f"runyard/{relative}:{node.lineno}: {node.value[:50]!r}")
    return found


def test_no_sql_text_outside_db() -> None:
    assert statements_outside_db() == []


def test_the_check_finds_a_statement() -> None:
    assert STATEMENT.match("DELETE FROM writes WHERE thread_id = ?")
    assert STATEMENT.match("\n    SELECT 1")
    assert not STATEMENT.match("Selected the newest checkpoint")
