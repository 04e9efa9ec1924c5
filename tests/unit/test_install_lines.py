"""`pip install` lines name only what can be installed: Runyard is on no package index.

Reference: `pip install 'runyard[tracing]'`, which the tracing section and the server's own
hint gave, fails with "No matching distribution found for runyard".
"""

from __future__ import annotations

import re
from importlib.metadata import requires
from pathlib import Path

from runyard.observability.tracing import INSTALL_HINT

ROOT = Path(__file__).resolve().parents[2]
PIP_INSTALL = re.compile(r"pip install ([^`\n\"]*)")
# Runyard by name alone, as if an index had it: `runyard`, `runyard[tracing]`.
RUNYARD_BY_NAME = re.compile(r"^runyard(\[[\w,]+\])?([<>=!~].*)?$")


def texts() -> dict[str, str]:
    """The files a user reads install lines in: README, docs, .env.example, the server's code."""
    paths = [ROOT / "README.md", ROOT / ".env.example", *sorted((ROOT / "docs").glob("*.md"))]
    paths += sorted((ROOT / "runyard").rglob("*.py"))
    return {str(path.relative_to(ROOT)): path.read_text() for path in paths}


def extra_packages(extra: str) -> set[str]:
    """The names of the packages an extra of the installed Runyard adds."""
    names = set()
    for requirement in requires("runyard") or []:
        if f'extra == "{extra}"' in requirement:
            names.add(re.split(r"[<>=!~;\[ ]", requirement, maxsplit=1)[0])
    return names


def test_no_install_line_names_runyard_from_an_index() -> None:
    found = []
    for name, text in texts().items():
        for line in PIP_INSTALL.findall(text):
            words = [word.strip("'\"()") for word in line.split() if not word.startswith("-")]
            found += [f"{name}: pip install {line}" for w in words if RUNYARD_BY_NAME.match(w)]
    assert not found, "\n".join(found)


def test_tracing_hint_names_the_extras_packages() -> None:
    packages = extra_packages("tracing")
    assert packages, "the installed Runyard has no tracing extra"
    assert INSTALL_HINT.startswith("pip install ")
    assert set(INSTALL_HINT.removeprefix("pip install ").split()) == packages
