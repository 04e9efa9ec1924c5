"""How graph files are imported: by their package's name when they are in one."""

from __future__ import annotations

from pathlib import Path

import pytest

from runyard.domain.errors import ConfigError
from runyard.project.modules import import_attribute, package_module_name


def write(path: Path, text: str = "") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_a_file_in_nested_packages_is_named_from_the_package_root(tmp_path: Path) -> None:
    write(tmp_path / "proj" / "app" / "__init__.py")
    write(tmp_path / "proj" / "app" / "agents" / "__init__.py")
    graph = write(tmp_path / "proj" / "app" / "agents" / "graph.py")
    assert package_module_name(graph) == (tmp_path / "proj", "app.agents.graph")


def test_a_loose_file_is_not_in_a_package(tmp_path: Path) -> None:
    assert package_module_name(write(tmp_path / "agent.py")) is None


def test_a_package_shadowed_by_an_imported_module_is_refused_naming_both(
    tmp_path: Path,
) -> None:
    # `json` is imported already (the standard library's); a project package of that name
    # cannot be imported beside it, and the message says so instead of serving the wrong one.
    write(tmp_path / "json" / "__init__.py")
    graph = write(tmp_path / "json" / "graph.py", "graph = 1\n")
    with pytest.raises(ConfigError) as caught:
        import_attribute(graph, "graph", "runyard_graphs", "graph 'g'")
    message = str(caught.value)
    assert "'json'" in message and "already imported" in message and "rename" in message


def test_a_loose_file_imports_its_siblings(tmp_path: Path) -> None:
    write(tmp_path / "loose_sibling_x1.py", "VALUE = 7\n")
    graph = write(tmp_path / "agent.py", "from loose_sibling_x1 import VALUE\ngraph = VALUE\n")
    assert import_attribute(graph, "graph", "runyard_graphs", "graph 'g'") == 7
