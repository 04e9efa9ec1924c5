"""SQL of the per-group caps: the group's lock and load, the held-back marks.

Used only when a cap applies (runyard/domain/group_caps.py): without caps a claim runs none
of these statements.
"""

from __future__ import annotations

import hashlib
from functools import cache
from typing import Any

from sqlalchemy import BigInteger, Text, bindparam, func, or_, select, type_coerce, update
from sqlalchemy.ext.asyncio import AsyncConnection

from runyard.db.dialect import clock, clock_plus, dialect_name, seconds_param
from runyard.db.driver import fetch_one
from runyard.db.tables import runs
from runyard.domain.group_caps import START_WINDOW_SECONDS, GroupLoad
from runyard.domain.status import RunStatus

_STARTED = runs.c.started_at.type
_LOCK = select(func.pg_advisory_xact_lock(bindparam("p_key", type_=BigInteger)))


def group_lock_key(group: str) -> int:
    """A stable signed 64-bit advisory lock key for a fairness group."""
    digest = hashlib.blake2b(f"runyard:group:{group}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


async def lock_group(session: AsyncConnection, group: str) -> None:
    """Serialize the claims of `group` until the transaction ends (PostgreSQL; SQLite's
    writes are serialized already)."""
    if dialect_name(session) != "postgresql":
        return
    await fetch_one(session, _LOCK, {"p_key": group_lock_key(group)})


@cache
def _load_statement(dialect: str) -> Any:
    since = clock_plus(dialect, "p_window")
    in_window = runs.c.started_at > since
    return select(
        func.count().filter(runs.c.status == RunStatus.RUNNING).label("running"),
        func.count().filter(in_window).label("started"),
        type_coerce(func.min(runs.c.started_at).filter(in_window), _STARTED).label("oldest"),
        type_coerce(clock(dialect), _STARTED).label("now"),
    ).where(
        runs.c.fairness_group == bindparam("p_group"),
        (runs.c.status == RunStatus.RUNNING) | in_window,
    )


async def group_load(session: AsyncConnection, group: str) -> GroupLoad:
    """The group's runs running now and started in the last minute (run under its lock, in
    a statement after the lock's, so it sees every claim committed before)."""
    dialect = dialect_name(session)
    params = {"p_group": group, "p_window": seconds_param(dialect, -START_WINDOW_SECONDS)}
    row = await fetch_one(session, _load_statement(dialect), params)
    assert row is not None
    frees_in = 0.0
    if row["oldest"] is not None and row["now"] is not None:
        age = (row["now"] - row["oldest"]).total_seconds()
        frees_in = max(START_WINDOW_SECONDS - age, 0.0)
    return GroupLoad(int(row["running"]), int(row["started"]), frees_in)


@cache
def _mark_statement(dialect: str) -> Any:
    reason = bindparam("p_reason", type_=Text())
    waiting = select(runs.c.run_id).where(
        runs.c.fairness_group == bindparam("p_group"),
        runs.c.status == RunStatus.PENDING,
        or_(runs.c.scheduled_at.is_(None), runs.c.scheduled_at <= clock(dialect)),
        or_(runs.c.held_back.is_(None), runs.c.held_back != reason),
    )
    if dialect == "postgresql":
        # Rows another transaction holds are skipped, never waited for: this statement does
        # not lock the runs' threads first (runyard/lifecycle/machine.py), so it must not wait.
        waiting = waiting.with_for_update(skip_locked=True)
    return update(runs).where(runs.c.run_id.in_(waiting.scalar_subquery())).values(held_back=reason)


async def mark_held_back(session: AsyncConnection, group: str, reason: str) -> None:
    """Say on the group's due pending runs why they wait (each run's claim clears it); runs
    already saying so are not written again."""
    dialect = dialect_name(session)
    await fetch_one(session, _mark_statement(dialect), {"p_group": group, "p_reason": reason})
