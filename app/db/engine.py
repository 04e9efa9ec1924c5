"""Builds the async SQLAlchemy engine for PostgreSQL or SQLite and applies migrations."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import event, text
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncEngine, async_sessionmaker, create_async_engine

from app.domain.errors import ConfigError

MIGRATIONS_DIR = Path(__file__).resolve().parents[2] / "migrations"
MIGRATION_LOCK = 72_797_100


def create_engine(url: str) -> AsyncEngine:
    """An engine tuned for the backend: pooled asyncpg, or SQLite in WAL mode."""
    if url.startswith("sqlite"):
        db_path = url.split(":///", 1)[1]
        if db_path and db_path != ":memory:":
            Path(db_path).parent.mkdir(parents=True, exist_ok=True)
        engine = create_async_engine(url, connect_args={"timeout": 30})
        event.listen(engine.sync_engine, "connect", _sqlite_pragmas)
        return engine
    return create_async_engine(url, pool_size=10, max_overflow=20, pool_pre_ping=True)


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    cursor = dbapi_conn.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.close()


def session_factory(engine: AsyncEngine) -> async_sessionmaker[Any]:
    """Sessions that keep loaded values after commit (services read them back)."""
    return async_sessionmaker(engine, expire_on_commit=False)


def alembic_config(url: str | None = None) -> Any:
    """The Alembic configuration pointing at Runyard's migration scripts."""
    from alembic.config import Config

    if not (MIGRATIONS_DIR / "env.py").exists():
        raise ConfigError(
            f"migration scripts not found at {MIGRATIONS_DIR}; install Runyard from its "
            "source tree (pip install -e .) so migrations/ is available"
        )
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    if url:
        config.set_main_option("sqlalchemy.url", url)
    return config


async def migrate(engine: AsyncEngine) -> None:
    """Bring the schema to the newest migration (idempotent)."""
    from alembic import command

    config = alembic_config()

    def upgrade(connection: Connection) -> None:
        config.attributes["connection"] = connection
        command.upgrade(config, "head")

    async with engine.begin() as conn:
        if conn.dialect.name == "postgresql":
            # Instances starting together take turns; the later ones find nothing to do.
            await conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK})
        await conn.run_sync(upgrade)


async def current_revision_is_head(engine: AsyncEngine) -> bool:
    """True when the database is at the newest migration."""
    from alembic.runtime.migration import MigrationContext
    from alembic.script import ScriptDirectory

    script = ScriptDirectory.from_config(alembic_config())

    def read(connection: Connection) -> set[str]:
        return set(MigrationContext.configure(connection).get_current_heads())

    async with engine.connect() as conn:
        heads = await conn.run_sync(read)
    return heads == set(script.get_heads())
