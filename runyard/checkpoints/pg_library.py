"""langgraph-checkpoint-postgres's own saver and tables, for what Runyard's saver hands on.

`PostgresSaver` (pg_saver.py) runs a run's statements itself; pruning, delta-channel history
and checkpoints in older formats go to the library's `AsyncPostgresSaver`, opened here on
first need with a psycopg pool of its own. The library's table migrations are read from its
source, without importing it, so the tables are set up without psycopg too.
"""

from __future__ import annotations

import ast
import asyncio
import copy
from collections.abc import Callable
from functools import cache
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as installed_version
from importlib.util import find_spec
from pathlib import Path
from typing import Any

from runyard.checkpoints.psycopg_pools import open_psycopg_pool
from runyard.domain.errors import ConfigError


@cache
def library_migrations() -> tuple[str, ...]:
    """langgraph-checkpoint-postgres's migrations, read from its source without importing it.

    The position of a migration in the list is its version (the library's own rule), so
    a database set up by either saver is current for both.
    """
    spec = find_spec("langgraph.checkpoint")
    for folder in (spec.submodule_search_locations or []) if spec else []:
        source = Path(folder) / "postgres" / "base.py"
        if not source.is_file():
            continue
        for node in ast.parse(source.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "MIGRATIONS" for t in node.targets
            ):
                try:
                    return tuple(ast.literal_eval(node.value))
                except ValueError:
                    break
    raise ConfigError(
        "cannot read the list of table migrations (MIGRATIONS, a list of SQL strings) of "
        f"langgraph-checkpoint-postgres {_installed('langgraph-checkpoint-postgres')}: "
        "install a release whose list is plain strings, such as 3.2.0"
    )


def _installed(distribution: str) -> str:
    try:
        return installed_version(distribution)
    except PackageNotFoundError:
        return "(not installed)"


class _NoLock:
    """Stands in for the library saver's instance-wide lock: each pooled connection is
    used alone, so runs reach the database in parallel."""

    async def __aenter__(self) -> None:
        return None

    async def __aexit__(self, *_exc: object) -> None:
        return None


class LibrarySaver:
    """The library's saver, opened on first need and shared by every copy of the saver."""

    def __init__(
        self, conninfo: str, pool_size: int, on_statements: Callable[[int], None] | None
    ) -> None:
        self._conninfo = conninfo
        self._pool_size = pool_size
        self._on_statements = on_statements
        self._opening = asyncio.Lock()
        self._pool: Any = None
        self._saver: Any = None
        self._views: dict[int, tuple[Any, Any]] = {}

    async def saver(self, serde: Any) -> Any:
        """The library's saver, with `serde` (a copy of the saver may carry its own)."""
        if self._saver is None:
            async with self._opening:
                if self._saver is None:
                    self._saver = await self._open(serde)
        if serde is self._saver.serde:
            return self._saver
        known = self._views.get(id(serde))
        if known is None or known[0] is not serde:
            view = copy.copy(self._saver)
            view.serde = serde
            known = self._views[id(serde)] = (serde, view)
        return known[1]

    async def _open(self, serde: Any) -> Any:
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

        pool = await open_psycopg_pool(self._conninfo, self._pool_size, self._on_statements)
        self._pool = pool
        saver = AsyncPostgresSaver(pool, serde=serde)
        saver.lock = _NoLock()  # type: ignore[assignment]
        return saver

    @property
    def opened(self) -> bool:
        """Whether the library's saver (and psycopg) has been needed yet."""
        return self._pool is not None

    async def close(self) -> None:
        """Close the psycopg pool, if it was ever opened."""
        if self._pool is not None:
            await self._pool.close()
