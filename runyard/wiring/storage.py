"""The storage phase: encryption at rest, the engines and their session factories, the
schema, the checkpointer and the store, each closed by the runtime's exit stack."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.store.base import BaseStore
from sqlalchemy.ext.asyncio import AsyncEngine

from runyard.checkpoints.checkpointer import open_checkpointer
from runyard.db.driver import StatementPool
from runyard.db.engine import (
    Sessions,
    create_engine,
    on_each_statement,
    require_database,
    session_factory,
)
from runyard.db.schema import SchemaFit, migrate, schema_state, where
from runyard.domain.errors import ConfigError
from runyard.longterm_store.store import StoreOptions, open_store, store_options
from runyard.observability.metrics import Metrics
from runyard.project.config import ProjectConfig
from runyard.services.catalog import Storage as ServicesStorage
from runyard.settings import Settings

if TYPE_CHECKING:
    from runyard.encryption.at_rest import AtRest
    from runyard.encryption.custom import CustomEncryption

log = logging.getLogger("runyard.storage")


@dataclass(frozen=True)
class Databases:
    """The engine and its session factories.

    `lease_sessions` is lease renewal's own engine on PostgreSQL (the main one on SQLite);
    `autocommit` commits each statement on its own: for reads and single-statement writes,
    which then cost no BEGIN and COMMIT/ROLLBACK round trips.
    """

    engine: AsyncEngine
    sessions: Sessions
    lease_sessions: Sessions
    autocommit: Sessions
    statements: StatementPool | None

    @asynccontextmanager
    async def atomic(self) -> AsyncIterator[Any]:
        """A session for one db-layer call that must be atomic.

        The calls made for this (`claim_run`, `finish_run_with_state`) are one statement
        on PostgreSQL, which needs no BEGIN and COMMIT round trips; on SQLite they are
        two statements, wrapped in a transaction.
        """
        if self.engine.dialect.name == "postgresql":
            async with self.autocommit() as session:
                yield session
        else:
            async with self.sessions() as session, session.begin():
                yield session


@dataclass(frozen=True)
class Storage:
    """What the storage phase opened."""

    at_rest: AtRest | None
    databases: Databases
    checkpointer: BaseCheckpointSaver
    store: BaseStore
    store_options: StoreOptions


async def open_storage(
    settings: Settings,
    project: ProjectConfig,
    encryption: CustomEncryption | None,
    metrics: Metrics,
    stack: AsyncExitStack,
) -> Storage:
    """Open the engines, check or migrate the schema, open the checkpointer and the store."""
    url = settings.resolved_database_url()
    at_rest = encryption_at_rest(settings)
    start_custom_encryption(encryption, at_rest, stack)
    databases = await open_databases(url, settings.db_pool_size, at_rest, metrics, stack)
    await require_database(databases.engine)
    await open_schema(databases.engine, settings.migrate_on_start or settings.is_embedded)
    pool_size, statements = settings.db_pool_size, databases.statements
    checkpointer = await stack.enter_async_context(
        open_checkpointer(
            url,
            settings.data_dir,
            metrics.checkpoint_statements.inc,
            pool_size,
            statements,
            at_rest,
            encryption,
        )
    )
    options = store_options(project)
    store = await stack.enter_async_context(
        open_store(url, settings.data_dir, options, pool_size, statements, at_rest, encryption)
    )
    return Storage(at_rest, databases, checkpointer, store, options)


async def open_schema(engine: AsyncEngine, migrate_on_start: bool) -> None:
    """Serve on the schema as it is when this code can (a newer one included, never
    downgraded); migrate an older one when allowed; otherwise refuse, saying what to run."""
    state = await schema_state(engine)
    if state.fit is SchemaFit.NEWER:
        log.info(
            "schema_newer_than_code code_revision=%s schema_revision=%s serves_code_from=%s",
            state.code,
            state.found,
            state.serves_code_from,
        )
    elif migrate_on_start and state.fit in (SchemaFit.EMPTY, SchemaFit.OLDER):
        move = await migrate(engine, on_wait=_log_waiting)
        if move.before != move.after:  # else another migrator did it meanwhile
            log.info("schema_migrated from_revision=%s to_revision=%s", move.before, move.after)
    elif not state.served:
        raise ConfigError(state.refusal(where(engine)))


def _log_waiting() -> None:
    log.info("migration_waiting reason=another_migrator_holds_the_lock")


async def open_databases(
    url: str, pool_size: int, at_rest: AtRest | None, metrics: Metrics, stack: AsyncExitStack
) -> Databases:
    """The engine, the lease renewal's own engine and the statement pool (PostgreSQL)."""
    json_codec = at_rest.json if at_rest else None
    engine = create_engine(url, pool_size, json_codec)
    on_each_statement(engine, metrics.runs_statements.inc)
    stack.push_async_callback(engine.dispose)
    sessions = session_factory(engine)
    # Lease renewal has a connection of its own: a pool busy with API traffic must not
    # make it wait past the lease (SQLite serializes writers anyway).
    lease_sessions = sessions
    statements = None
    if engine.dialect.name == "postgresql":
        lease_engine = create_engine(url, 1, json_codec)
        on_each_statement(lease_engine, metrics.runs_statements.inc)
        stack.push_async_callback(lease_engine.dispose)
        lease_sessions = session_factory(lease_engine)
        statements = StatementPool(engine, pool_size)
        stack.push_async_callback(statements.close)
        await statements.open()
    autocommit = session_factory(engine, autocommit=True, statements=statements)
    return Databases(engine, sessions, lease_sessions, autocommit, statements)


def encryption_at_rest(settings: Settings) -> AtRest | None:
    """What LANGGRAPH_AES_KEY and its companions ask to encrypt; None (and nothing
    imported) without a key."""
    if not settings.aes_key:
        return None
    from runyard.encryption.at_rest import from_settings

    return from_settings(settings.aes_key, settings.aes_previous_keys, settings.aes_json_key_names)


def start_custom_encryption(
    encryption: CustomEncryption | None, at_rest: AtRest | None, stack: AsyncExitStack
) -> None:
    """Start the custom encryption's handler loop; refuse it beside the built-in AES."""
    if encryption is None:
        return
    if at_rest is not None:
        # LangGraph's server reads the built-in AES's data while custom encryption
        # writes (a migration path); Runyard does not implement that path yet, so it
        # refuses the pair instead of leaving the AES data unreadable.
        raise ConfigError(
            f"encryption.path ({encryption.path}) and LANGGRAPH_AES_KEY are both set; "
            "use one of them: Runyard does not read built-in AES data under custom "
            "encryption"
        )
    encryption.handlers.start()
    stack.callback(encryption.handlers.stop)


def services_storage(storage: Storage) -> ServicesStorage:
    """What the services read of the storage phase."""
    databases = storage.databases
    return ServicesStorage(
        databases.engine,
        databases.sessions,
        databases.autocommit,
        databases.atomic,
        storage.checkpointer,
        storage.store,
        storage.store_options,
    )
