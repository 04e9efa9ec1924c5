"""The schema's revision: which migration the database is at, whether this code serves on it,
and moving it to another revision, one migrator at a time.

Each migration from 0009 on says, in its module's `serves_code_from`, the oldest code
revision that still serves on the schema it leaves. The migrations' environment writes that
into `schema_compatibility` as each one is applied (`record_step`), so an instance that finds
a revision it does not know, written by a newer release, learns from the database alone
whether it may serve on it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from sqlalchemy import delete, insert, inspect, select, text
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncEngine

from runyard.db.engine import SCHEMA_REVISION, postgres_url
from runyard.db.setup_lock import alone_on_file, setup_alone
from runyard.db.tables import schema_compatibility
from runyard.domain.errors import ConfigError
from runyard.domain.urls import masked_url

MIGRATIONS_DIR = Path(__file__).resolve().parents[1] / "migrations"
MIGRATION_LOCK = 72_797_100
# What a migration module names to say which code serves on the schema it leaves.
SERVES_CODE_FROM = "serves_code_from"
MIGRATE = "runyard migrate"


class SchemaFit(StrEnum):
    """How the database's schema stands to this code's migrations."""

    CURRENT = "current"  # at this code's newest migration
    EMPTY = "empty"  # no Runyard tables yet
    OLDER = "older"  # at an earlier migration of this code: `runyard migrate` brings it up
    NEWER = "newer"  # at a later migration that this code still serves on
    TOO_NEW = "too_new"  # at a later migration that needs newer code
    UNKNOWN = "unknown"  # at a revision this code does not know, with no word on who serves


SERVED = frozenset({SchemaFit.CURRENT, SchemaFit.NEWER})


@dataclass(frozen=True)
class SchemaState:
    """The revision the database is at and what this code makes of it."""

    fit: SchemaFit
    found: str | None  # None: no Runyard tables; several heads are joined by commas
    serves_code_from: str | None = None  # from the database, for a revision this code lacks
    code: str = SCHEMA_REVISION

    @property
    def served(self) -> bool:
        """True when this code can serve on the schema as it is."""
        return self.fit in SERVED

    def refusal(self, where: str) -> str:
        """Why this code does not start on the schema, with the command that fixes it."""
        at = f"at migration {self.found}"
        if self.fit is SchemaFit.EMPTY:
            return (
                f"the database {where} is without Runyard's tables, and this Runyard needs "
                f"migration {self.code}: run `{MIGRATE}` first, or start without --no-migrate "
                "(RUNYARD_MIGRATE_ON_START=true) to migrate at start-up"
            )
        if self.fit is SchemaFit.OLDER:
            return (
                f"the database {where} is {at}, older than this Runyard's {self.code}: run "
                f"`{MIGRATE}` first, or start without --no-migrate "
                "(RUNYARD_MIGRATE_ON_START=true) to migrate at start-up"
            )
        back = f"or move the schema back with that release's `{MIGRATE} --to {self.code}`"
        if self.fit is SchemaFit.TOO_NEW:
            return (
                f"the database {where} is {at}, newer than this Runyard's {self.code}, and "
                f"serves code from migration {self.serves_code_from} on: run a release that "
                f"knows {self.serves_code_from}, {back}"
            )
        return (
            f"the database {where} is {at}, which this Runyard (at {self.code}) does not know, "
            f"and it does not say which code serves on it: run the release that wrote it, {back}"
        )


@dataclass(frozen=True)
class SchemaMove:
    """What a migration did: the revision before and after (equal when nothing was done)."""

    before: str | None
    after: str | None


def alembic_config(url: str | None = None) -> Any:
    """The Alembic configuration pointing at Runyard's migration scripts."""
    from alembic.config import Config

    if not (MIGRATIONS_DIR / "env.py").exists():
        raise ConfigError(
            f"migration scripts not found at {MIGRATIONS_DIR}: this Runyard installation is "
            "incomplete; reinstall it from the clone or wheel it came from "
            "(pip install --force-reinstall PATH)"
        )
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    if url:
        config.set_main_option("sqlalchemy.url", url)
    return config


@functools.cache
def known_revisions() -> tuple[str, ...]:
    """This code's migrations, oldest first."""
    from alembic.script import ScriptDirectory

    scripts = ScriptDirectory.from_config(alembic_config())
    return tuple(reversed([script.revision for script in scripts.walk_revisions()]))


async def schema_revisions(engine: AsyncEngine) -> set[str]:
    """The migrations the database is at: empty when it has no Runyard schema."""
    async with engine.connect() as conn:
        if not await conn.run_sync(lambda sync: inspect(sync).has_table("alembic_version")):
            return set()
        rows = await conn.execute(text("SELECT version_num FROM alembic_version"))
        return {row[0] for row in rows}


async def schema_is_current(engine: AsyncEngine) -> bool:
    """True when the database is at the newest migration (no Alembic import needed)."""
    return await schema_revisions(engine) == {SCHEMA_REVISION}


async def schema_state(engine: AsyncEngine) -> SchemaState:
    """Where the database's schema stands to this code (Alembic is imported only when it
    is not at this code's newest migration)."""
    found = await schema_revisions(engine)
    if found == {SCHEMA_REVISION}:
        return SchemaState(SchemaFit.CURRENT, SCHEMA_REVISION)
    if not found:
        return SchemaState(SchemaFit.EMPTY, None)
    if len(found) > 1:
        return SchemaState(SchemaFit.UNKNOWN, ", ".join(sorted(found)))
    (revision,) = found
    if revision in known_revisions():
        return SchemaState(SchemaFit.OLDER, revision)
    serves_from = await _serves_code_from(engine, revision)
    if serves_from is None:
        return SchemaState(SchemaFit.UNKNOWN, revision)
    fit = SchemaFit.NEWER if serves_from in known_revisions() else SchemaFit.TOO_NEW
    return SchemaState(fit, revision, serves_from)


async def _serves_code_from(engine: AsyncEngine, revision: str) -> str | None:
    table = schema_compatibility.name
    async with engine.connect() as conn:
        if not await conn.run_sync(lambda sync: inspect(sync).has_table(table)):
            return None
        query = select(schema_compatibility.c.serves_code_from).where(
            schema_compatibility.c.revision == revision
        )
        return (await conn.execute(query)).scalar()


def where(engine: AsyncEngine) -> str:
    """The engine's database as a message names it (no password)."""
    if engine.dialect.name == "postgresql":
        return f"{engine.url.database!r} on {postgres_url(engine).where}"
    return masked_url(engine.url.render_as_string(hide_password=False))


async def migrate(
    engine: AsyncEngine, target: str | None = None, on_wait: Callable[[], None] | None = None
) -> SchemaMove:
    """Move the schema to `target`, up or down; without one, up to this code's newest
    migration, leaving alone a newer schema this code serves on (never downgraded).

    One migrator at a time: another (an instance starting, a `runyard migrate` Job) holds
    the migration lock until it is done, and `on_wait()` is called once if one does.
    Raises ConfigError for a `target` this code does not know, or a database at a revision
    this code cannot move from.
    """
    if target is not None and target not in known_revisions():
        raise ConfigError(
            f"unknown migration {target!r}: this Runyard knows {', '.join(known_revisions())}"
        )
    state = await schema_state(engine)
    if target is None and state.served:
        return SchemaMove(state.found, state.found)  # the usual start: no lock, no Alembic
    moves: list[SchemaMove] = []

    async def move() -> None:
        moves.append(await _move(engine, target))

    if engine.dialect.name == "postgresql":
        conninfo = engine.url.set(drivername="postgresql").render_as_string(hide_password=False)
        await setup_alone(conninfo, MIGRATION_LOCK, move, on_wait)
    elif _sqlite_file(engine) is not None:
        await alone_on_file(Path(f"{_sqlite_file(engine)}.migration-lock"), move, on_wait)
    else:
        await move()  # an in-memory database: one connection, one process
    return moves[0]


def _sqlite_file(engine: AsyncEngine) -> str | None:
    database = engine.url.database
    return database if database and database != ":memory:" else None


async def _move(engine: AsyncEngine, target: str | None) -> SchemaMove:
    """Under the migration lock: look again (another migrator may have moved it), then move."""
    state = await schema_state(engine)
    if target is None:
        if state.served:
            return SchemaMove(state.found, state.found)
        if state.fit not in (SchemaFit.EMPTY, SchemaFit.OLDER):
            raise ConfigError(state.refusal(where(engine)))
        target = SCHEMA_REVISION
    elif state.fit not in (SchemaFit.EMPTY, SchemaFit.OLDER, SchemaFit.CURRENT):
        raise ConfigError(
            f"the database {where(engine)} is at migration {state.found}, which this Runyard "
            f"(at {SCHEMA_REVISION}) does not know: run `{MIGRATE} --to {target}` with the "
            "release that wrote it"
        )
    if state.found == target:
        return SchemaMove(target, target)
    known = known_revisions()
    down = state.found is not None and known.index(target) < known.index(state.found)
    async with engine.connect() as conn:
        await conn.run_sync(_run_alembic, target, down)
    return SchemaMove(state.found, target)


def _run_alembic(connection: Connection, target: str, down: bool) -> None:
    """Alembic's upgrade or downgrade on a connection outside any transaction: env.py runs
    each migration in a transaction of its own, which a migration may leave for an index
    built CONCURRENTLY (`op.get_context().autocommit_block()`)."""
    from alembic import command

    config = alembic_config()
    config.attributes["connection"] = connection
    sqlite = connection.dialect.name == "sqlite"
    if sqlite:
        # A migration that rebuilds a table (how SQLite alters most things) drops the old
        # one; with foreign keys on, that deletes the rows referring to it, with the cascade.
        connection.exec_driver_sql("PRAGMA foreign_keys=OFF")
        connection.commit()
    try:
        (command.downgrade if down else command.upgrade)(config, target)
    finally:
        connection.commit()
        if sqlite:
            connection.exec_driver_sql("PRAGMA foreign_keys=ON")
            connection.commit()


def record_step(connection: Connection, revision: str, upgrade: bool, module: Any) -> None:
    """Write (upgrade) or remove (downgrade) the compatibility record of one migration, in
    the migration's own transaction; nothing before the migration that creates the table."""
    if not inspect(connection).has_table(schema_compatibility.name):
        return
    connection.execute(
        delete(schema_compatibility).where(schema_compatibility.c.revision == revision)
    )
    if upgrade:
        # A migration that does not say is served only by code that knows it.
        serves_from = getattr(module, SERVES_CODE_FROM, revision)
        connection.execute(
            insert(schema_compatibility).values(revision=revision, serves_code_from=serves_from)
        )
