"""Every migration, up and down, one at a time with rows in every table: what the schema
keeps on either side keeps its rows, through Runyard's own `migrate` (`runyard migrate --to`)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from runyard.db.engine import create_engine
from runyard.db.schema import known_revisions, migrate
from tests.support.schemas import BACKENDS, contents, empty_database, fill, shape_of


async def on(engine: AsyncEngine, work: Callable[..., Any], *args: Any) -> Any:
    """`work(connection, *args)` on a connection of the engine."""
    async with engine.connect() as conn:
        return await conn.run_sync(work, *args)


async def move_keeping_rows(engine: AsyncEngine, revision: str) -> None:
    """Migrate to `revision`; fail if a row or a value of what both schemas have changed."""
    shapes, rows = await on(engine, shape_of), await on(engine, contents)
    move = await migrate(engine, revision)
    assert move.after == revision, move
    new_shapes, new_rows = await on(engine, shape_of), await on(engine, contents)
    for table, shape in shapes.items():
        if table not in new_shapes:
            continue  # the move dropped it: its own migration's business
        assert rows[table], f"{table} has no rows before the move to {revision}"
        kept = shape.columns.keys() & new_shapes[table].columns.keys()
        before = sorted(({k: row[k] for k in kept} for row in rows[table]), key=repr)
        after = sorted(({k: row[k] for k in kept} for row in new_rows[table]), key=repr)
        assert after == before, f"the move to {revision} changed the rows of {table}"


@pytest.mark.parametrize("backend", BACKENDS)
async def test_every_migration_keeps_the_rows_up_and_down(backend: str, tmp_path: Path) -> None:
    # Up from nothing, a row more in every table at each step; then down to the first.
    revisions = known_revisions()
    with empty_database(backend, tmp_path) as url:
        engine = create_engine(url)
        try:
            for n, revision in enumerate(revisions):
                await move_keeping_rows(engine, revision)
                await on(engine, fill, n)
            for revision in reversed(revisions[:-1]):
                await move_keeping_rows(engine, revision)
        finally:
            await engine.dispose()
