"""Alembic migrations go up, down and up again cleanly, driven by the alembic CLI."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from alembic.script import ScriptDirectory
from sqlalchemy import create_engine, inspect, text

from runyard.db.engine import SCHEMA_REVISION
from runyard.db.schema import alembic_config
from runyard.db.tables import metadata
from tests.support.databases import fresh_database

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(params=["postgres", "sqlite"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """An empty throwaway database: a fresh PostgreSQL database or a new SQLite file."""
    if request.param == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp_path / 'migrations.sqlite'}"
        return
    with fresh_database("runyard_migrations") as url:
        yield url


def alembic(url: str, *args: str) -> str:
    """Run the alembic CLI from the repository root against url; return its output."""
    env = {**os.environ, "DATABASE_URL": url}
    result = subprocess.run(
        [sys.executable, "-m", "alembic", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=90,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, f"alembic {' '.join(args)} failed:\n{output}"
    return output


def sync_url(url: str) -> str:
    """The same database through a synchronous driver, for inspection."""
    return url.replace("+aiosqlite", "").replace("postgresql+asyncpg", "postgresql+psycopg")


def tables_and_version(url: str) -> tuple[set[str], set[str]]:
    """The tables in the database and the revisions recorded in alembic_version."""
    engine = create_engine(sync_url(url))
    try:
        with engine.connect() as conn:
            tables = set(inspect(conn).get_table_names())
            versions: set[str] = set()
            if "alembic_version" in tables:
                rows = conn.execute(text("SELECT version_num FROM alembic_version"))
                versions = {row[0] for row in rows}
        return tables, versions
    finally:
        engine.dispose()


def test_upgrade_downgrade_upgrade(database_url: str) -> None:
    url = database_url.replace("postgresql://", "postgresql+asyncpg://")
    heads = set(ScriptDirectory.from_config(alembic_config()).get_heads())
    assert len(heads) == 1, f"migrations must have one head, found {sorted(heads)}"
    # The server skips Alembic when the database is at SCHEMA_REVISION: it must be the head.
    assert heads == {SCHEMA_REVISION}
    expected = set(metadata.tables)

    alembic(database_url, "upgrade", "head")
    tables, versions = tables_and_version(url)
    assert expected <= tables, f"missing after upgrade: {sorted(expected - tables)}"
    assert versions == heads
    assert "(head)" in alembic(database_url, "current")

    alembic(database_url, "downgrade", "base")
    tables, versions = tables_and_version(url)
    assert not expected & tables, f"left after downgrade: {sorted(expected & tables)}"
    assert versions == set()

    alembic(database_url, "upgrade", "head")
    tables, versions = tables_and_version(url)
    assert expected <= tables
    assert versions == heads


def built_on(dialect: str) -> Any:
    """Alembic's include_object: leave out the indexes tables.py builds on another backend
    only (`ddl_if(dialect=...)`, the PostgreSQL-only JSONB containment indexes)."""

    def include(obj: Any, _name: Any, kind: str, _reflected: bool, _compare_to: Any) -> bool:
        only = getattr(obj, "_ddl_if", None) if kind == "index" else None
        return only is None or only.dialect in (None, dialect)

    return include


def test_models_and_migrations_agree(database_url: str) -> None:
    """After `upgrade head` autogenerate finds nothing to add: tables.py matches migrations."""
    alembic(database_url, "upgrade", "head")
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext

    url = database_url.replace("postgresql://", "postgresql+asyncpg://")
    engine = create_engine(sync_url(url))
    try:
        with engine.connect() as conn:
            opts = {"compare_type": True, "include_object": built_on(conn.dialect.name)}
            context = MigrationContext.configure(conn, opts=opts)
            diff = compare_metadata(context, metadata)
    finally:
        engine.dispose()
    assert diff == [], f"tables.py and migrations/ differ: {diff}"
