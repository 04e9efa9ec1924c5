"""The documentation: a short README for newcomers, and docs/ built as a site with no dead link.

`mkdocs build --strict` fails on a link to a page or an anchor that does not exist, and on a
page left out of the nav. The README is read on its own (outside the site), so its links
are checked here the way a reader follows them.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from runyard.project.config import IMAGE_KEYS, SECTION_KEYS, SERVED_KEYS, UNSUPPORTED_KEYS
from runyard.project.http_config import KNOWN_KEYS as HTTP_KEYS
from runyard.settings import setting_names

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
FRESH_MACHINE_COMMANDS = (
    "python3 -m venv .venv && .venv/bin/pip install -e . && .venv/bin/runyard dev",
    "scripts/test",
)
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def heading_anchors(markdown: str) -> set[str]:
    """The anchors GitHub gives the headings of a Markdown file (code blocks skipped)."""
    anchors, fenced = set(), False
    for line in markdown.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (heading := re.match(r"#{1,6} (.+)", line)):
            text = re.sub(r"[^\w\- ]", "", heading.group(1).strip().lower())
            anchors.add(text.replace(" ", "-"))
    return anchors


def fenced_lines(markdown: str) -> list[str]:
    """The lines inside the code blocks of a Markdown file."""
    lines, fenced = [], False
    for line in markdown.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif fenced:
            lines.append(line.strip())
    return lines


def test_site_builds_with_no_broken_link(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=110,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    assert (tmp_path / "browser-chat.png").exists()


def test_readme_is_the_newcomers_page() -> None:
    text = README.read_text()
    assert len(text.splitlines()) < 300
    commands = fenced_lines(text)
    for command in FRESH_MACHINE_COMMANDS:
        assert command in commands, f"the README lost the command {command!r}"
    # CI runs exactly the README's test command.
    assert (ROOT / ".ci" / "run").read_text().splitlines()[-1] == "exec scripts/test"


@pytest.mark.parametrize("source", ["README.md", *(f"docs/{p.name}" for p in DOCS.glob("*.md"))])
def test_relative_links_lead_somewhere(source: str) -> None:
    """Every relative link of the README reaches a file (and a heading of it, when it names
    one); the pages' links are the site build's to check, and must stay inside docs/."""
    path = ROOT / source
    for target in LINK.findall(path.read_text()):
        if re.match(r"[a-z]+:", target):
            continue
        file, _, anchor = target.partition("#")
        resolved = (path.parent / file).resolve() if file else path
        assert resolved.exists(), f"{source} links to {target}, which does not exist"
        if source.startswith("docs/"):
            assert resolved.is_relative_to(DOCS), f"{source} links outside docs/: {target}"
        if anchor and resolved.suffix == ".md":
            assert anchor in heading_anchors(resolved.read_text()), f"{source}: {target}"


def test_configuration_page_names_every_setting_and_key() -> None:
    page = (DOCS / "configuration.md").read_text()
    missing = [name for name in setting_names() if f"`{name}`" not in page]
    assert not missing, f"docs/configuration.md does not name {missing}"
    keys = [*SERVED_KEYS, *IMAGE_KEYS, *UNSUPPORTED_KEYS]
    keys += [f"{section}.{key}" for section, subs in SECTION_KEYS.items() for key in subs]
    keys += [f"http.{key}" for key in HTTP_KEYS]
    written = set(re.findall(r"`([$\w.]+)`", page))
    # A row may name several keys of one section after the first: `http.a`, `b`, `c`.
    written |= {f"http.{key}" for key in written}
    unnamed = sorted(
        key
        for key in keys
        if key not in written and not any(w.startswith(f"{key}.") for w in written)
    )
    assert not unnamed, f"docs/configuration.md does not name the keys {unnamed}"
