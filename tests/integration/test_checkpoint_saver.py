"""The PostgreSQL checkpoint saver stores exactly what langgraph-checkpoint-postgres stores."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any, TypedDict

import psycopg
import pytest
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.checkpoint.postgres.base import MIGRATIONS
from langgraph.graph import StateGraph
from sqlalchemy.exc import DBAPIError

from runyard.checkpoints.checkpointer import delete_run_checkpoints, open_checkpointer
from runyard.checkpoints.pg_saver import PostgresSaver, library_migrations
from runyard.db.driver import StatementPool
from runyard.db.engine import create_engine
from runyard.domain.errors import UNSTORABLE_TEXT_SQLSTATES
from tests.support.databases import fresh_database, open_statement_pool

pytestmark = pytest.mark.postgres


@pytest.fixture
def database() -> Iterator[str]:
    with fresh_database("runyard_saver") as url:
        yield url


def _asyncpg_url(url: str) -> str:
    return "postgresql+asyncpg://" + url.split("://", 1)[1]


@pytest.fixture
async def statements(database: str) -> AsyncIterator[StatementPool]:
    """Runyard's statement pool on the test database."""
    engine = create_engine(_asyncpg_url(database), pool_size=2)
    try:
        async with open_statement_pool(engine) as pool:
            yield pool
    finally:
        await engine.dispose()


@pytest.fixture
async def saver(database: str, tmp_path: Path, statements: StatementPool) -> AsyncIterator[Any]:
    """Runyard's PostgreSQL saver on the test database, its tables set up."""
    url = _asyncpg_url(database)
    async with open_checkpointer(url, tmp_path, None, 2, statements) as opened:
        assert isinstance(opened, PostgresSaver)
        yield opened


async def test_the_saver_passes_the_checkpointer_conformance_suite(
    database: str, tmp_path: Path, statements: StatementPool
) -> None:
    @checkpointer_test(name="PostgresSaver")
    async def saver() -> AsyncIterator[BaseCheckpointSaver]:
        url = _asyncpg_url(database)
        async with open_checkpointer(url, tmp_path, None, 4, statements) as opened:
            assert isinstance(opened, PostgresSaver)
            yield opened

    report = await validate(saver)
    failures = {name: r.failures for name, r in report.results.items() if r.failures}
    assert report.passed_all(), failures
    assert report.passed_all_base()


def test_the_migrations_are_the_librarys_own() -> None:
    assert library_migrations() == tuple(MIGRATIONS)


async def test_setup_leaves_the_tables_as_the_librarys_setup_does(
    database: str, tmp_path: Path, statements: StatementPool
) -> None:
    async with open_checkpointer(_asyncpg_url(database), tmp_path, None, 2, statements):
        pass
    with psycopg.connect(database) as conn:
        versions = [v for (v,) in conn.execute("SELECT v FROM checkpoint_migrations ORDER BY v")]
    assert versions == list(range(len(MIGRATIONS)))
    # The library finds nothing left to do, and a second start-up neither.
    async with AsyncPostgresSaver.from_conn_string(database) as stock:
        await stock.setup()
    async with open_checkpointer(_asyncpg_url(database), tmp_path, None, 2, statements):
        pass
    with psycopg.connect(database) as conn:
        again = [v for (v,) in conn.execute("SELECT v FROM checkpoint_migrations ORDER BY v")]
    assert again == versions


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
    database: str, tmp_path: Path, statements: StatementPool
) -> None:
    url = _asyncpg_url(database)
    async with (
        open_checkpointer(url, tmp_path, None, 4, statements) as lean,
        AsyncPostgresSaver.from_conn_string(database) as stock,
    ):
        for saver, thread in ((stock, "stock"), (lean, "lean")):
            graph = _graph().compile(checkpointer=saver)
            config = {"configurable": {"thread_id": thread}}
            await graph.ainvoke({"n": 0}, config)  # type: ignore[arg-type]
            # A tuple in the state takes the library's own path inside Runyard's saver.
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
    database: str, tmp_path: Path, statements: StatementPool
) -> None:
    counted: list[int] = []
    url = _asyncpg_url(database)
    async with open_checkpointer(url, tmp_path, counted.append, 1, statements) as saver:
        graph = _graph().compile(checkpointer=saver)
        config = {"configurable": {"thread_id": "counted"}}
        counted.clear()  # the tables' setup
        await graph.ainvoke({"n": 0}, config)  # type: ignore[arg-type]
        sent = sum(counted)
    rows = _rows(database, "counted")
    assert rows["blobs"]
    # One read of the thread's last checkpoint, one statement per checkpoint, blobs
    # included, and the writes (counted one per row, as they are sent in one batch).
    assert sent == 1 + len(rows["checkpoints"]) + len(rows["writes"])


async def test_runs_and_history_never_open_the_librarys_saver(saver: Any) -> None:
    graph = _graph().compile(checkpointer=saver)
    config: Any = {"configurable": {"thread_id": "t"}}
    await graph.ainvoke({"n": 0}, {**config, "metadata": {"run_id": "r"}})
    assert (await graph.aget_state(config)).values["n"] == 2
    history = [state async for state in graph.aget_state_history(config)]
    # Every checkpoint of the run, newest first.
    assert [state.values.get("n") for state in history] == [2, 1, 0, None]
    assert len([t async for t in saver.alist(config, filter={"run_id": "r"}, limit=2)]) == 2
    await saver.adelete_thread("gone")
    assert not saver.library.opened
    await saver.aprune(["t"], strategy="keep_latest")
    assert saver.library.opened
    assert [t.checkpoint["id"] async for t in saver.alist(config)] == [
        history[0].config["configurable"]["checkpoint_id"]
    ]


async def test_history_in_the_older_format_is_the_librarys(saver: Any, database: str) -> None:
    graph = _graph().compile(checkpointer=saver)
    config: Any = {"configurable": {"thread_id": "t"}}
    await graph.ainvoke({"n": 0}, config)
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute("UPDATE checkpoints SET checkpoint = jsonb_set(checkpoint, '{v}', '3')")
    listed = [t async for t in saver.alist(config)]
    assert saver.library.opened  # the library migrates pending sends of such checkpoints
    assert [t.checkpoint["channel_values"].get("n") for t in listed] == [2, 1, 0, None]


async def test_a_runs_checkpoints_are_deleted_with_their_writes(saver: Any, database: str) -> None:
    graph = _graph().compile(checkpointer=saver)
    config: Any = {"configurable": {"thread_id": "t"}}
    await graph.ainvoke({"n": 0}, {**config, "metadata": {"run_id": "first"}})
    await graph.ainvoke({"n": 0}, {**config, "metadata": {"run_id": "second"}})
    assert await delete_run_checkpoints(saver, "t", "second") == 4
    assert (await graph.aget_state(config)).values["n"] == 2
    rows = _rows(database, "t")
    assert len(rows["checkpoints"]) == 4
    with psycopg.connect(database) as conn:
        orphans = conn.execute(
            "SELECT count(*) FROM checkpoint_writes w WHERE NOT EXISTS "
            "(SELECT 1 FROM checkpoints c WHERE c.thread_id = w.thread_id "
            "AND c.checkpoint_id = w.checkpoint_id)"
        ).fetchone()
    assert orphans == (0,)


async def test_a_nul_in_a_history_filter_is_the_clients_error(saver: Any) -> None:
    config: Any = {"configurable": {"thread_id": "t"}}
    with pytest.raises(DBAPIError) as refused:
        [item async for item in saver.alist(config, filter={"k": "a\x00b"})]
    # What the API answers with 422 (runyard/api/errors.py).
    assert getattr(refused.value.orig, "sqlstate", None) in UNSTORABLE_TEXT_SQLSTATES
    assert [item async for item in saver.alist(config)] == []


async def test_the_synchronous_methods_answer_from_other_threads_only(saver: Any) -> None:
    graph = _graph().compile(checkpointer=saver)
    config: Any = {"configurable": {"thread_id": "t"}}
    await graph.ainvoke({"n": 0}, config)
    latest = await asyncio.to_thread(saver.get_tuple, config)
    assert latest is not None and latest.checkpoint["channel_values"]["n"] == 2
    listed = await asyncio.to_thread(lambda: list(saver.list(config)))
    assert listed[0].checkpoint["id"] == latest.checkpoint["id"]
    assert len(listed) == 4
    with pytest.raises(asyncio.InvalidStateError, match="another thread"):
        saver.get_tuple(config)
