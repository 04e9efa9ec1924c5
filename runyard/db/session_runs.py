"""The thread streaming session's reads of a thread's runs, as statements built once.

An events stream reads the thread's first page of runs when it opens, then polls for the
next one while the thread is idle. Built once per page size, these statements take the
statement pool on PostgreSQL (`fetch_all`), without SQLAlchemy's per-execution work.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from sqlalchemy import and_, bindparam, or_, select
from sqlalchemy.ext.asyncio import AsyncConnection

from runyard.db.driver import Row, fetch_all
from runyard.db.tables import runs


@cache
def _page_statement(after: bool, limit: int) -> Any:
    stmt = select(runs).where(runs.c.thread_id == bindparam("p_thread_id"))
    if after:
        created_at = bindparam("p_created_at", type_=runs.c.created_at.type)
        stmt = stmt.where(
            or_(
                runs.c.created_at > created_at,
                and_(
                    runs.c.created_at == created_at,
                    runs.c.run_id > bindparam("p_run_id", type_=runs.c.run_id.type),
                ),
            )
        )
    return stmt.order_by(runs.c.created_at, runs.c.run_id).limit(limit)


async def runs_page(
    session: AsyncConnection, thread_id: str, after: tuple[Any, str] | None, limit: int
) -> list[Row]:
    """The thread's runs created after (created_at, run_id), oldest first (from the first
    when None), at most `limit` of them."""
    params: dict[str, Any] = {"p_thread_id": thread_id}
    if after is not None:
        params["p_created_at"], params["p_run_id"] = after
    return await fetch_all(session, _page_statement(after is not None, limit), params)
