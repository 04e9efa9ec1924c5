"""Throwaway PostgreSQL databases, created and dropped per test session."""

from __future__ import annotations

import asyncio
import hashlib
import os
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import psycopg
from sqlalchemy import text

from runyard.db.engine import on_each_statement

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncEngine

    from runyard.db.driver import StatementPool

ADMIN_URL = os.environ.get("RUNYARD_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/postgres")


def postgres_available() -> bool:
    """True when the test PostgreSQL server answers."""
    try:
        with psycopg.connect(ADMIN_URL, connect_timeout=3):
            return True
    except psycopg.Error:
        return False


def create_database(prefix: str = "runyard_test") -> str:
    """Create an empty database and return its URL."""
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(ADMIN_URL, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    base = ADMIN_URL.rsplit("/", 1)[0]
    return f"{base}/{name}"


def schema_fingerprint() -> str:
    """A digest of everything a migrated database holds: Runyard's migrations and the
    checkpointer library's. A template database is named by it, so a changed migration
    (in this checkout or another one on the same server) never clones a stale schema."""
    from runyard.checkpoints.pg_library import library_migrations

    root = Path(__file__).resolve().parents[2] / "runyard" / "migrations"
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        digest.update(path.relative_to(root).as_posix().encode())
        digest.update(path.read_bytes())
    for statement in library_migrations():
        digest.update(statement.encode())
    return digest.hexdigest()[:16]


_TEMPLATES: dict[str, str] = {}  # fingerprint -> name of the template database, per process


def migrated_template() -> str:
    """The name of a database migrated to the newest schema, with the checkpointer's tables,
    built once per schema on the test server and kept there as a template to clone.

    Processes that want it at once (the workers of a parallel run, other test runs on the
    server) take turns under an advisory lock named after it: the first builds it, the
    others wait and find it built. It is built under a name of its own and renamed into
    place, so a builder that dies half-way never leaves a half-migrated template to clone.
    Nobody connects to it afterwards (ALLOW_CONNECTIONS false): CREATE DATABASE ... TEMPLATE
    refuses a source that has connections.
    """
    fingerprint = schema_fingerprint()
    if fingerprint in _TEMPLATES:
        return _TEMPLATES[fingerprint]
    name = f"runyard_template_{fingerprint}"
    with psycopg.connect(ADMIN_URL, autocommit=True) as lock:
        # Held until this connection closes, also when the build fails.
        lock.execute("SELECT pg_advisory_lock(hashtext(%s))", (name,))
        found = lock.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
        if found is None:
            _build_template(name)
    _TEMPLATES[fingerprint] = name
    return name


def _build_template(name: str) -> None:
    url = create_database("runyard_template_build")
    building = url.rsplit("/", 1)[1]
    try:
        # On a thread of its own: the caller may be inside a running event loop.
        with ThreadPoolExecutor(1) as pool:
            pool.submit(asyncio.run, _migrate_template(url)).result()
        with psycopg.connect(ADMIN_URL, autocommit=True) as conn:
            conn.execute(f'ALTER DATABASE "{building}" WITH ALLOW_CONNECTIONS false')
            conn.execute(f'ALTER DATABASE "{building}" RENAME TO "{name}"')
    except psycopg.errors.DuplicateDatabase:
        pass  # a test run of an older checkout, without the lock, renamed its copy first
    finally:
        drop_database(url)


async def _migrate_template(url: str) -> None:
    async with migrated_postgres_engine(url, pool_size=1):
        pass
    await create_checkpoint_tables(url, Path(tempfile.gettempdir()))


def create_migrated_database(prefix: str = "runyard_test") -> str:
    """Create a database at the newest schema, with the checkpointer's tables, and return
    its URL: a copy of the migrated template, far cheaper than migrating a new one."""
    template = migrated_template()
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(ADMIN_URL, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
    base = ADMIN_URL.rsplit("/", 1)[0]
    return f"{base}/{name}"


def drop_database(url: str) -> None:
    """Drop a database made by create_database, disconnecting its clients."""
    name = url.rsplit("/", 1)[1]
    with psycopg.connect(ADMIN_URL, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextmanager
def fresh_database(prefix: str = "runyard_test", migrated: bool = False) -> Iterator[str]:
    """A new database for the duration of the block, dropped afterwards: empty, or with
    `migrated` a copy of the migrated template.

    Fails the calling test with what to do when the PostgreSQL server does not answer.
    """
    import pytest  # here, not above: bench/ uses this module without the test extras

    if not postgres_available():
        pytest.fail("PostgreSQL is not reachable at 127.0.0.1:5432; start it (docs/testing.md)")
    url = create_migrated_database(prefix) if migrated else create_database(prefix)
    try:
        yield url
    finally:
        drop_database(url)


@asynccontextmanager
async def open_statement_pool(
    engine: AsyncEngine, size: int = 2
) -> AsyncIterator[StatementPool | None]:
    """Runyard's statement pool on the engine's database, open for the block; None on
    SQLite, which has none (as wiring/storage.py opens it)."""
    from runyard.db.driver import StatementPool

    if engine.dialect.name != "postgresql":
        yield None
        return
    pool = StatementPool(engine, size)
    await pool.open()
    try:
        yield pool
    finally:
        await pool.close()


@asynccontextmanager
async def migrated_postgres_engine(url: str, pool_size: int = 2) -> AsyncIterator[AsyncEngine]:
    """Runyard's engine on the PostgreSQL database at `url` (a psycopg URL), migrated, for
    the block; disposed of afterwards."""
    from runyard.db.engine import create_engine
    from runyard.db.schema import migrate

    engine = create_engine("postgresql+asyncpg://" + url.split("://", 1)[1], pool_size=pool_size)
    try:
        await migrate(engine)
        yield engine
    finally:
        await engine.dispose()


async def create_checkpoint_tables(url: str, data_dir: Path) -> None:
    """The checkpointer's tables on a PostgreSQL database, as a server makes them at start-up
    (the claim statement reads them)."""
    from runyard.checkpoints.checkpointer import open_checkpointer
    from runyard.db.engine import create_engine

    engine = create_engine("postgresql+asyncpg://" + url.split("://", 1)[1], pool_size=1)
    try:
        async with (
            open_statement_pool(engine, 1) as statements,
            open_checkpointer(url, data_dir, pool_size=1, statements=statements),
        ):
            pass
    finally:
        await engine.dispose()


@asynccontextmanager
async def migrated_engine(kind: str, data_dir: Path) -> AsyncIterator[AsyncEngine]:
    """An engine on a migrated database for the block: a SQLite file in `data_dir`, or a
    fresh PostgreSQL database (a copy of the migrated template, dropped afterwards) with
    the checkpointer's tables too."""
    import pytest  # here, not above: bench/ uses this module without the test extras

    from runyard.db.engine import create_engine
    from runyard.db.schema import migrate

    url = None
    if kind == "sqlite":
        engine = create_engine(f"sqlite+aiosqlite:///{data_dir / 'runyard.sqlite'}")
    else:
        if not postgres_available():
            pytest.fail("PostgreSQL is not reachable at 127.0.0.1:5432; start it (docs/testing.md)")
        url = create_migrated_database()
        engine = create_engine("postgresql+asyncpg://" + url.split("://", 1)[1])
    try:
        if url is None:
            await migrate(engine)
        yield engine
    finally:
        await engine.dispose()
        if url is not None:
            drop_database(url)


async def until_true(engine: AsyncEngine, sql: str, what: str, tries: int = 250) -> None:
    """Run `sql` (a look at pg_stat_activity, say) every 20 ms until its first value is true;
    fail with `what` never happened after `tries` looks.

    Each look is a transaction of its own: PostgreSQL keeps what pg_stat_activity showed for
    the rest of a transaction, so looks inside one would never see a backend end.
    """
    async with engine.connect() as conn:
        conn = await conn.execution_options(isolation_level="AUTOCOMMIT")
        for _ in range(tries):
            if (await conn.execute(text(sql))).scalar():
                return
            await asyncio.sleep(0.02)
    raise AssertionError(f"{what} never happened")


class Counted:
    """An engine on a fresh, migrated database, with every statement it sends counted."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self.statements = 0
        on_each_statement(engine, self._count)

    def _count(self) -> None:
        self.statements += 1
