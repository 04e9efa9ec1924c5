"""The PostgreSQL saver reads langgraph-checkpoint-postgres's migrations from its source."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from runyard.checkpoints import pg_library
from runyard.domain.errors import ConfigError


@pytest.fixture
def library_source(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A stand-in for the library's `postgres/base.py`, found where the library would be."""
    source = tmp_path / "postgres" / "base.py"
    source.parent.mkdir()
    spec = SimpleNamespace(submodule_search_locations=[str(tmp_path)])
    monkeypatch.setattr(pg_library, "find_spec", lambda _name: spec)
    pg_library.library_migrations.cache_clear()
    yield source
    pg_library.library_migrations.cache_clear()


def test_the_list_is_read_in_order(library_source: Path) -> None:
    library_source.write_text(
        "import psycopg\n"
        "OTHER = 1\n"
        'MIGRATIONS = [\n    "CREATE TABLE a (v int);",\n    """SELECT 1;""",\n]\n'
    )
    assert pg_library.library_migrations() == ("CREATE TABLE a (v int);", "SELECT 1;")


def test_a_list_that_is_not_plain_strings_stops_start_up_with_a_remedy(
    library_source: Path,
) -> None:
    library_source.write_text('TABLE = "t"\nMIGRATIONS = [f"CREATE TABLE {TABLE} (v int);"]\n')
    with pytest.raises(ConfigError, match=r"langgraph-checkpoint-postgres .*install a release"):
        pg_library.library_migrations()
