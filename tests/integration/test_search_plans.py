"""With a few hundred thousand threads and runs on PostgreSQL, every documented search and
count, and every engine query that looks for work, is answered through an index: its plan
never scans the threads or runs table whole.

The statements are those the real query functions send (caught as they execute), so a change
to a query's shape that the indexes cannot serve (a metadata filter that is no longer a
containment, a sort no index holds) fails here. Timing is bench/data_scale.py's business.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import psycopg
import pytest
from psycopg import sql
from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncEngine

from bench.data_scale import routes
from bench.scale_fill import Volumes, fill_statements
from tests.support.databases import fresh_database, migrated_postgres_engine

pytestmark = [pytest.mark.slow, pytest.mark.postgres, pytest.mark.timeout(600)]

THREADS = 200_000
BIG_TABLES = frozenset({"threads", "runs"})
# Counting every thread reads every thread (an index-only scan at best): not a search.
WHOLE = frozenset({"threads: count all"})
# What PostgreSQL adds to a custom plan's cost for planning it (1000 x cpu_operator_cost per
# relation, a few relations), before comparing it with the generic plan's.
PLANNING_ALLOWANCE = 10.0
ENGINE = "engine:"
SEARCHES = [name for name in routes("") if name not in WHOLE]


@pytest.fixture(scope="module")
def database_url() -> Iterator[str]:
    """A migrated database with THREADS threads (and a run each, a backlog of pending ones,
    assistants and crons), analyzed."""
    with fresh_database("runyard_plans", migrated=True) as url:
        with psycopg.connect(url, autocommit=True, cursor_factory=psycopg.ClientCursor) as conn:
            for statement, params in fill_statements(Volumes(threads=THREADS)):
                conn.execute(statement, params)  # type: ignore[call-overload]
            conn.execute("VACUUM ANALYZE")
        yield url


@pytest.fixture(scope="module")
async def engine(database_url: str) -> AsyncIterator[AsyncEngine]:
    """Runyard's engine on the filled database."""
    async with migrated_postgres_engine(database_url, pool_size=1) as engine:
        yield engine


async def plans_of(
    engine: AsyncEngine, database_url: str, name: str
) -> list[tuple[str, dict[str, Any]]]:
    """Each statement the route `name` sends, with the plans it may run under (EXPLAIN,
    never executed): the custom plan of a prepared statement's first executions, and the
    generic plan, which knows no bound value, that it may run under after five.

    PostgreSQL switches to the generic plan when its estimated cost is no more than the
    average of the custom plans so far. The engine's queries bind the same statuses every
    time, so that happens only when it is cheaper. A search binds what users ask for: a
    heavy owner's custom plans, or those from before an index was built, raise the average
    and the generic plan is taken whatever it costs, so it has to be good too.
    """
    sent: list[tuple[str, Any]] = []

    def catch(_conn: Any, _cursor: Any, statement: str, params: Any, *_rest: Any) -> None:
        sent.append((statement, params))

    async with engine.connect() as session:
        last = (await session.exec_driver_sql("SELECT max(thread_id) FROM runs")).scalar_one()
        event.listen(engine.sync_engine, "before_cursor_execute", catch)
        try:
            await routes(last)[name](session)
        finally:
            event.remove(engine.sync_engine, "before_cursor_execute", catch)
        await session.rollback()
    plans = []
    with psycopg.connect(database_url) as conn:
        for number, (statement, params) in enumerate(sent):
            values = sql.SQL(", ").join(sql.Literal(value) for value in params)
            execute = sql.SQL("EXECUTE {}({})" if params else "EXECUTE {}").format(
                sql.Identifier(f"p{number}"), values
            )
            conn.execute(f"PREPARE p{number} AS {statement}")
            custom, generic = (
                explain(conn, execute, mode) for mode in ("force_custom_plan", "force_generic_plan")
            )
            plans.append((f"custom plan: {statement}", custom))
            cheaper = generic["Total Cost"] <= custom["Total Cost"] + PLANNING_ALLOWANCE
            if cheaper or not name.startswith(ENGINE):
                plans.append((f"generic plan: {statement}", generic))
        conn.rollback()
    return plans


def explain(conn: psycopg.Connection[Any], execute: sql.Composed, mode: str) -> dict[str, Any]:
    """The plan of a prepared statement's EXECUTE under the plan_cache_mode `mode`."""
    conn.execute(sql.SQL("SET plan_cache_mode = {}").format(sql.Identifier(mode)))
    row = conn.execute(sql.SQL("EXPLAIN (FORMAT JSON) {}").format(execute)).fetchone()
    assert row is not None
    return dict(row[0][0]["Plan"])


def nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The plan's nodes, depth first."""
    yield plan
    for child in plan.get("Plans", ()):
        yield from nodes(child)


def outline(plan: dict[str, Any], depth: int = 0) -> str:
    """The plan as a few readable lines, for a failure's message."""
    line = "  " * depth + " ".join(
        str(plan[key]) for key in ("Node Type", "Relation Name", "Index Name") if key in plan
    )
    return "\n".join([line, *(outline(child, depth + 1) for child in plan.get("Plans", ()))])


@pytest.mark.parametrize("name", SEARCHES)
async def test_each_search_reads_the_big_tables_through_an_index(
    engine: AsyncEngine, database_url: str, name: str
) -> None:
    plans = await plans_of(engine, database_url, name)
    assert plans, f"{name} sent no statement"
    for statement, plan in plans:
        scans = [
            node["Relation Name"]
            for node in nodes(plan)
            if node["Node Type"] == "Seq Scan" and node.get("Relation Name") in BIG_TABLES
        ]
        assert not scans, f"{name} scans {scans} whole:\n{statement}\n{outline(plan)}"


async def test_a_search_by_owner_finds_its_threads_through_the_metadata_index(
    engine: AsyncEngine, database_url: str
) -> None:
    # The auth filter an auth handler returns ({"owner": ...}) is the filter of every page
    # load: a walk of another index that filters row by row is as slow as a scan.
    for name in (
        "threads: search by owner with 1 old thread",
        "threads: an owner's 10 newest by updated_at",
        "threads: count by owner",
        "threads: search by metadata",
    ):
        plans = await plans_of(engine, database_url, name)
        for statement, plan in plans:
            used = {node.get("Index Name") for node in nodes(plan)}
            assert "ix_threads_metadata" in used, f"{name}:\n{statement}\n{outline(plan)}"
