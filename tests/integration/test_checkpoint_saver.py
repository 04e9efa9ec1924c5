"""The PostgreSQL checkpoint saver stores exactly what langgraph-checkpoint-postgres stores."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any, TypedDict

import psycopg
import pytest
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.graph import StateGraph

from app.db.driver import StatementPool
from app.db.engine import create_engine
from app.graphs.checkpointer import open_checkpointer
from app.graphs.pg_saver import LeanPostgresSaver
from tests.support.databases import fresh_database, open_statement_pool

pytestmark = pytest.mark.postgres


@pytest.fixture
def database() -> Iterator[str]:
    with fresh_database("runyard_saver") as url:
        yield url


def _asyncpg_url(url: str) -> str:
    return "postgresql+asyncpg://" + url.split("://", 1)[1]


@pytest.fixture(params=["psycopg", "statement pool"])
async def statements(request: Any, database: str) -> AsyncIterator[StatementPool | None]:
    """Where the saver's writes go: its own psycopg pool, or Runyard's statement pool."""
    if request.param == "psycopg":
        yield None
        return
    engine = create_engine(_asyncpg_url(database), pool_size=2)
    try:
        async with open_statement_pool(engine) as pool:
            yield pool
    finally:
        await engine.dispose()


async def test_the_saver_passes_the_checkpointer_conformance_suite(
    database: str, tmp_path: Path, statements: StatementPool | None
) -> None:
    @checkpointer_test(name="LeanPostgresSaver")
    async def lean() -> AsyncIterator[BaseCheckpointSaver]:
        url = _asyncpg_url(database)
        async with open_checkpointer(url, tmp_path, None, 4, statements) as saver:
            assert isinstance(saver, LeanPostgresSaver)
            yield saver

    report = await validate(lean)
    failures = {name: r.failures for name, r in report.results.items() if r.failures}
    assert report.passed_all(), failures
    assert report.passed_all_base()


class State(TypedDict, total=False):
    n: int
    items: list[Any]
    pair: Any


def _step(state: State) -> dict[str, Any]:
    return {
        "n": state.get("n", 0) + 1,
        "items": [*state.get("items", []), {"at": state.get("n", 0)}],
    }


def _graph() -> Any:
    graph = StateGraph(State)
    graph.add_node("first", _step)
    graph.add_node("second", _step)
    graph.add_edge("__start__", "first")
    graph.add_edge("first", "second")
    return graph


# A channel version is a counter, a dot and a random fraction, which Python may write in
# exponent notation (below 1e-4: one draw in 10,000).
_VERSION = re.compile(r"^(\d{32})\.[0-9.e+-]+$")


def _stable(value: Any) -> Any:
    """`value` with channel versions cut to their counter (their fraction is random)."""
    if isinstance(value, dict):
        return {_stable(k): _stable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_stable(v) for v in value)
    if isinstance(value, str) and (match := _VERSION.match(value)):
        return match.group(1)
    return value


def _rows(conninfo: str, thread_id: str) -> dict[str, list[tuple[Any, ...]]]:
    """What a thread left in the saver's three tables, without ids that differ per run."""
    with psycopg.connect(conninfo) as conn:
        checkpoints = conn.execute(
            "SELECT checkpoint_ns, checkpoint - 'id' - 'ts', metadata, "
            "parent_checkpoint_id IS NULL FROM checkpoints WHERE thread_id = %s "
            "ORDER BY checkpoint_id",
            (thread_id,),
        ).fetchall()
        blobs = conn.execute(
            "SELECT checkpoint_ns, channel, version, type, blob FROM checkpoint_blobs "
            "WHERE thread_id = %s ORDER BY channel, version",
            (thread_id,),
        ).fetchall()
        writes = conn.execute(
            "SELECT checkpoint_ns, task_path, idx, channel, type, blob FROM checkpoint_writes "
            "WHERE thread_id = %s ORDER BY channel, idx, type, blob",
            (thread_id,),
        ).fetchall()
    return _stable({"checkpoints": checkpoints, "blobs": blobs, "writes": writes})


async def test_a_graph_leaves_the_same_rows_as_with_the_library_saver(
    database: str, tmp_path: Path, statements: StatementPool | None
) -> None:
    counted: list[int] = []
    url = _asyncpg_url(database)
    async with open_checkpointer(url, tmp_path, counted.append, 4, statements) as lean:
        stock = AsyncPostgresSaver(lean.conn)  # type: ignore[attr-defined]
        for saver, thread in ((stock, "stock"), (lean, "lean")):
            graph = _graph().compile(checkpointer=saver)
            config = {"configurable": {"thread_id": thread}}
            await graph.ainvoke({"n": 0}, config)  # type: ignore[arg-type]
            # A tuple in the state takes the library's own path inside the lean saver.
            await graph.ainvoke({"pair": (1, 2)}, config)  # type: ignore[arg-type]
            state = await graph.aget_state(config)  # type: ignore[arg-type]
            assert state.values["n"] == 4
            assert tuple(state.values["pair"]) == (1, 2)
    conninfo = database
    stock_rows, lean_rows = _rows(conninfo, "stock"), _rows(conninfo, "lean")
    assert lean_rows["checkpoints"] and lean_rows["blobs"] and lean_rows["writes"]
    # Metadata carries the thread id; everything else must match.
    for rows in (stock_rows, lean_rows):
        rows["checkpoints"] = [
            (ns, body, {k: v for k, v in meta.items() if k != "thread_id"}, root)
            for ns, body, meta, root in rows["checkpoints"]
        ]
    assert lean_rows == stock_rows


async def test_a_checkpoint_and_its_blobs_are_one_statement(
    database: str, tmp_path: Path, statements: StatementPool | None
) -> None:
    counted: list[int] = []
    url = _asyncpg_url(database)
    async with open_checkpointer(url, tmp_path, counted.append, 1, statements) as saver:
        graph = _graph().compile(checkpointer=saver)
        config = {"configurable": {"thread_id": "counted"}}
        counted.clear()  # the tables' setup
        await graph.ainvoke({"n": 0}, config)  # type: ignore[arg-type]
        sent = sum(counted)
        # Prepared server-side, so PostgreSQL does not parse and plan them each time
        # (asyncpg, behind the statement pool, always prepares).
        async with saver.conn.connection() as conn:  # type: ignore[attr-defined]
            prepared = await (
                await conn.execute("SELECT count(*) FROM pg_prepared_statements")
            ).fetchone()
        assert prepared is not None
        assert next(iter(prepared.values())) >= (3 if statements is None else 1)
    rows = _rows(database, "counted")
    assert rows["blobs"]
    # One read of the thread's last checkpoint, one statement per checkpoint, blobs
    # included, and the writes (counted one per row, as they are sent in one batch).
    assert sent == 1 + len(rows["checkpoints"]) + len(rows["writes"])
