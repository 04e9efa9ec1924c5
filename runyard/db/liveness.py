"""Which instances are alive, as PostgreSQL knows it: each instance of a fleet holds a
session-level advisory lock keyed from its instance id (the id runs' `owner` column holds)
on a connection of its own. PostgreSQL releases the lock when that session ends: at once when
the process dies (its socket closes), or when the connection is lost. A paused process keeps
its connection, and its lock.

The lock is the two-key form, (LIVENESS_LOCK_CLASS, hashtext(instance id)): the class keeps
it apart from every one-key advisory lock (migrations, setup, caps, crons). Two instance ids
that hash alike share a key: the second instance cannot take it, and counts as alive while
the first one lives (its runs then wait for their leases, as without liveness).

The statements here take and check an instance's own lock on its connection (asyncpg), and
read, in any session, which owners of running runs hold theirs (`owners`: the reaper takes
over the runs of an owner it saw holding its lock and that holds it no longer);
`instances_alive` answers the same question for any list of instance ids.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from runyard.domain.status import RunStatus

# The first key of every liveness lock ("RYLV"); the second is hashtext(instance id).
LIVENESS_LOCK_CLASS = 0x52594C56

# Whether `key_of` (a SQL expression of an instance id) names a granted liveness lock of
# this database: pg_locks shows a two-key advisory lock as classid, objid, objsubid 2.
_HELD = """
SELECT 1 FROM pg_locks AS held
WHERE held.locktype = 'advisory' AND held.granted AND held.objsubid = 2
  AND held.database = (SELECT oid FROM pg_database WHERE datname = current_database())
  AND held.classid = {cls}::oid AND held.objid = hashtext({key})::oid
"""

_TAKE = f"SELECT pg_try_advisory_lock({LIVENESS_LOCK_CLASS}, hashtext($1))"
_MINE = (
    "SELECT EXISTS ("
    + _HELD.format(cls=LIVENESS_LOCK_CLASS, key="$1")
    + " AND held.pid = pg_backend_pid())"
)

# The owners of running runs, how many each holds and whether each holds its liveness lock;
# and whether the checker's own lock is held by a session that has lasted `trust` seconds:
# after a restart or failover of the database every session is new, and every instance has
# that long to take its lock back before anyone is judged by it.
_OWNERS = text(
    "SELECT runs.owner, count(*) AS runs, EXISTS ("
    + _HELD.format(cls=LIVENESS_LOCK_CLASS, key="runs.owner")
    + ") AS alive, EXISTS ("
    + _HELD.format(cls=LIVENESS_LOCK_CLASS, key=":me")
    + " AND EXISTS (SELECT 1 FROM pg_stat_activity AS session"
    " WHERE session.pid = held.pid"
    " AND session.backend_start <= clock_timestamp() - make_interval(secs => :trust)))"
    " AS trusted FROM runs WHERE runs.status = :running AND runs.owner IS NOT NULL"
    " GROUP BY runs.owner ORDER BY runs.owner"
)

_ALIVE = text(
    "SELECT ids.id, EXISTS ("
    + _HELD.format(cls=LIVENESS_LOCK_CLASS, key="ids.id")
    + ") AS alive FROM unnest(CAST(:ids AS text[])) AS ids(id)"
)


async def connect(
    conninfo: str, instance_id: str, lease: float, beat: float, on_closed: Callable[[Any], None]
) -> Any:
    """A connection of the instance's own for its liveness lock (asyncpg, autocommit);
    `on_closed(connection)` is called as soon as it closes, whoever closed it (the server
    ending the session, the network resetting it, this process)."""
    import asyncpg

    connection = await asyncpg.connect(
        conninfo,
        timeout=lease,
        server_settings={
            # Seen in pg_stat_activity, for operators counting connections.
            "application_name": f"runyard liveness {instance_id}"[:63],
            # A session whose peer vanished without closing its socket (power lost, a cut
            # that drops packets) ends after about a lease and two beats, not the system's
            # default two hours; until then its runs wait for their leases.
            "tcp_keepalives_idle": str(max(1, round(lease))),
            "tcp_keepalives_interval": str(max(1, round(beat))),
            "tcp_keepalives_count": "2",
        },
    )
    connection.add_termination_listener(on_closed)
    return connection


async def take_lock(connection: Any, instance_id: str) -> bool:
    """On the instance's own connection (asyncpg): take its liveness lock; False when
    another session holds that key (a hash twin, or a session of this instance that
    PostgreSQL has not closed yet)."""
    return bool(await connection.fetchval(_TAKE, instance_id))


async def holds_lock(connection: Any, instance_id: str) -> bool:
    """On the instance's own connection: True while this session holds its liveness lock."""
    return bool(await connection.fetchval(_MINE, instance_id))


@dataclass(frozen=True)
class Owners:
    """The owners of running runs as one statement saw them: how many runs each holds,
    which of them hold their liveness lock, and whether the checker may judge them (its own
    liveness session is old enough)."""

    runs: dict[str, int] = field(default_factory=dict)
    alive: frozenset[str] = frozenset()
    trusted: bool = False


async def owners(session: AsyncConnection, checker: str, trust_seconds: float) -> Owners:
    """The owners of running runs and their liveness, as `checker` may judge them (see
    `_OWNERS`). PostgreSQL only."""
    params = {"me": checker, "trust": trust_seconds, "running": RunStatus.RUNNING.value}
    rows = (await session.execute(_OWNERS, params)).all()
    return Owners(
        runs={str(row.owner): int(row.runs) for row in rows},
        alive=frozenset(str(row.owner) for row in rows if row.alive),
        trusted=bool(rows) and all(row.trusted for row in rows),
    )


async def instances_alive(session: AsyncConnection, instance_ids: Sequence[str]) -> dict[str, bool]:
    """Whether each instance holds its liveness lock now. PostgreSQL only."""
    if not instance_ids:
        return {}
    result = await session.execute(_ALIVE, {"ids": list(instance_ids)})
    return {str(instance): bool(alive) for instance, alive in result.all()}
