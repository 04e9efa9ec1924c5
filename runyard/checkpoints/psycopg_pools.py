"""The psycopg pools of LangGraph's own PostgreSQL saver and store, opened when first needed.

Both take the connections the library expects: autocommit, rows as dicts, and statements
prepared server-side from their first execution (unprepared, PostgreSQL parsed and planned
every checkpoint query anew). psycopg is imported here, not at start-up.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


async def open_psycopg_pool(
    conninfo: str, size: int, on_statements: Callable[[int], None] | None = None
) -> Any:
    """An open psycopg pool of at most `size` connections (one kept open); `on_statements(n)`
    is told of the statements its cursors send."""
    from psycopg.rows import dict_row
    from psycopg_pool import AsyncConnectionPool

    kwargs: dict[str, Any] = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
    if on_statements is not None:
        kwargs["cursor_factory"] = _counting_cursor(on_statements)
    pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
        conninfo, min_size=1, max_size=size, open=False, kwargs=kwargs
    )
    await pool.open(wait=True, timeout=30)
    return pool


def _counting_cursor(on_statements: Callable[[int], None]) -> type:
    from psycopg import AsyncCursor

    class CountingCursor(AsyncCursor):  # type: ignore[type-arg]
        async def execute(self, *args: Any, **kwargs: Any) -> Any:
            on_statements(1)
            return await super().execute(*args, **kwargs)

        async def executemany(self, query: Any, params_seq: Any, **kwargs: Any) -> None:
            params_seq = list(params_seq)
            on_statements(len(params_seq))
            await super().executemany(query, params_seq, **kwargs)

    return CountingCursor
