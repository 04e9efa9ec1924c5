"""SQL of the instances' own records (the `instances` table): each instance writes its row
at every heartbeat and reads back whether an operator asked it to drain; the console lists
them and records a drain asked of one; a row not written for a long while is forgotten."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import delete, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncConnection

from runyard.db.dialect import clock, clock_plus, dialect_name, seconds_param
from runyard.db.tables import instances

# Rows the console lists at most: a fleet larger than this shows its most recent beats.
MAX_LISTED = 500


async def beat(
    session: AsyncConnection,
    instance_id: str,
    host: str,
    version: str,
    started_at: datetime,
    slots: int,
    slots_used: int,
    draining: bool,
) -> str | None:
    """Write this instance's row (insert or update, one statement) and return who asked it
    to drain, None when nobody did."""
    dialect = dialect_name(session)
    values: dict[str, Any] = {
        "instance_id": instance_id,
        "host": host,
        "version": version,
        "started_at": started_at,
        "heartbeat_at": clock(dialect),
        "slots": slots,
        "slots_used": slots_used,
        "draining": draining,
    }
    insert = (postgresql.insert if dialect == "postgresql" else sqlite.insert)(instances)
    changing = {k: v for k, v in values.items() if k not in ("instance_id", "started_at")}
    statement = (
        insert.values(**values)
        .on_conflict_do_update(index_elements=[instances.c.instance_id], set_=changing)
        .returning(instances.c.drain_requested_by)
    )
    row = (await session.execute(statement)).first()
    return None if row is None else row[0]


async def remove(session: AsyncConnection, instance_id: str) -> None:
    """Forget this instance's row (it stopped)."""
    await session.execute(delete(instances).where(instances.c.instance_id == instance_id))


async def forget_silent(session: AsyncConnection, older_than_seconds: float) -> None:
    """Forget the rows of instances that have not beaten for this long (killed long ago)."""
    dialect = dialect_name(session)
    await session.execute(
        delete(instances).where(
            instances.c.heartbeat_at < clock_plus(dialect, "p_age"),
        ),
        {"p_age": seconds_param(dialect, -older_than_seconds)},
    )


async def list_instances(session: AsyncConnection) -> list[dict[str, Any]]:
    """The recorded instances, most recent heartbeat first (at most MAX_LISTED)."""
    statement = select(instances).order_by(instances.c.heartbeat_at.desc()).limit(MAX_LISTED)
    return [dict(row._mapping) for row in await session.execute(statement)]


async def request_drain(session: AsyncConnection, instance_id: str, by: str) -> bool:
    """Record that `by` asked this instance to drain; False when no such instance is
    recorded."""
    result = await session.execute(
        update(instances)
        .where(instances.c.instance_id == instance_id)
        .values(drain_requested_by=by[:255])
        .returning(instances.c.instance_id)
    )
    return result.first() is not None
