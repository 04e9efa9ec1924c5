"""Alembic environment: runs on a connection handed in by Runyard, or on sqlalchemy.url."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Collection, Mapping
from typing import Any

from alembic import context
from alembic.runtime.migration import MigrationContext, MigrationInfo
from sqlalchemy.engine import Connection

from runyard.db.engine import create_engine
from runyard.db.schema import record_step
from runyard.db.tables import metadata
from runyard.settings import Settings

config = context.config
target_metadata = metadata


def _record(
    ctx: MigrationContext, step: MigrationInfo, heads: Collection[Any], run_args: Mapping[str, Any]
) -> None:
    """Write the compatibility record of the migration just applied (or remove it)."""
    assert ctx.connection is not None and step.up_revision_id is not None
    # A migration script's Revision carries its module (where `serves_code_from` is).
    module = getattr(step.up_revision, "module", None)
    record_step(ctx.connection, step.up_revision_id, step.is_upgrade, module)


def _run(connection: Connection) -> None:
    # A transaction per migration: one may leave its transaction for an index built
    # CONCURRENTLY, and the migrations before it stay applied and recorded.
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
        transaction_per_migration=True,
        on_version_apply=_record,
    )
    with context.begin_transaction():
        context.run_migrations()


async def _run_async(url: str) -> None:
    engine = create_engine(url, pool_size=1)
    # Not in a transaction: env.py begins one per migration.
    async with engine.connect() as conn:
        await conn.run_sync(_run)
        await conn.commit()
    await engine.dispose()


def _url() -> str:
    url = config.get_main_option("sqlalchemy.url") or os.environ.get("DATABASE_URL")
    return Settings(DATABASE_URL=url).resolved_database_url()


connection = config.attributes.get("connection")
if context.is_offline_mode():
    context.configure(url=_url(), target_metadata=target_metadata, literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()
elif connection is not None:
    _run(connection)
else:
    asyncio.run(_run_async(_url()))
