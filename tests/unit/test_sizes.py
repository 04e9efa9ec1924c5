"""Small units (issue 34): no module of runyard/ over 400 lines and no function over 60.

Modules are counted in lines of the file, functions from their `def` (decorators left out)
to their last line, nested functions inside their own. The migrations are exempt: each is
one revision, written once. What is still too long is listed below with its reason; the
lists may only shrink, so an entry that is back within its bound fails the test until it is
struck out.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "runyard"
EXEMPT = (PACKAGE / "migrations",)
MODULE_LINES = 400
FUNCTION_LINES = 60

# Modules still over MODULE_LINES, each with the reason it is.
LONG_MODULES: dict[str, str] = {}
# Functions still over FUNCTION_LINES (`module:Qualified.name`), each with the reason.
LONG_FUNCTIONS: dict[str, str] = {}


def modules() -> list[Path]:
    """Every module of the package, the exempt folders left out."""
    return [
        path
        for path in sorted(PACKAGE.rglob("*.py"))
        if not any(path.is_relative_to(folder) for folder in EXEMPT)
    ]


def name_of(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def module_lines() -> dict[str, int]:
    """Lines of each module."""
    return {name_of(path): len(path.read_text(encoding="utf-8").splitlines()) for path in modules()}


def function_lines() -> dict[str, int]:
    """Lines of each function and method, by `module:Qualified.name`."""
    found: dict[str, int] = {}

    def visit(node: ast.AST, module: str, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                name = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef):
                    end = child.end_lineno or child.lineno
                    found[f"{module}:{name}"] = end - child.lineno + 1
                visit(child, module, f"{name}.")
            else:
                visit(child, module, prefix)

    for path in modules():
        visit(ast.parse(path.read_text(encoding="utf-8")), name_of(path), "")
    return found


def over(sizes: dict[str, int], bound: int) -> dict[str, int]:
    return {name: size for name, size in sizes.items() if size > bound}


def test_no_module_over_its_bound_unless_listed() -> None:
    unlisted = {
        name: lines
        for name, lines in over(module_lines(), MODULE_LINES).items()
        if name not in LONG_MODULES
    }
    assert unlisted == {}, f"split these modules (at most {MODULE_LINES} lines each)"


def test_no_function_over_its_bound_unless_listed() -> None:
    unlisted = {
        name: lines
        for name, lines in over(function_lines(), FUNCTION_LINES).items()
        if name not in LONG_FUNCTIONS
    }
    assert unlisted == {}, f"shorten these functions (at most {FUNCTION_LINES} lines each)"


def test_every_listed_module_is_still_over_its_bound() -> None:
    long = over(module_lines(), MODULE_LINES)
    assert sorted(set(LONG_MODULES) - set(long)) == [], "strike these out of LONG_MODULES"


def test_every_listed_function_is_still_over_its_bound() -> None:
    long = over(function_lines(), FUNCTION_LINES)
    assert sorted(set(LONG_FUNCTIONS) - set(long)) == [], "strike these out of LONG_FUNCTIONS"


def test_every_listing_gives_its_reason_in_one_line() -> None:
    reasons = [*LONG_MODULES.values(), *LONG_FUNCTIONS.values()]
    assert all(reason.strip() and "\n" not in reason for reason in reasons)
