"""Data scale: how the list, search and count routes' cost grows with the rows stored.

Unlike the other scenarios this one talks to PostgreSQL, not HTTP: it fills a database of its
own by plain SQL (bench/scale_fill.py: the API is far too slow for a million threads), then
times the very query functions the routes and the engine call (runyard/db/), at p50 and p99,
at each size. At each size it also times them, and inserts and updates, without the
indexes `SCALE_INDEXES` names, so their worth and their cost are measured in the same run
(writes without them both before and after the writes with them, averaged).

    python -m bench.data_scale [--sizes 10000,100000,1000000] [--repeat 30] [--writes 1000]

One JSON line per size goes to stdout; a Markdown table of every size to stderr at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import statistics
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import psycopg
from sqlalchemy.dialects import postgresql
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine
from sqlalchemy.schema import CreateIndex

from bench.scale_fill import HEAVY_OWNER, LONE_OWNER, TYPICAL_OWNER, Volumes, fill_statements
from runyard.db import assistants as assistants_db
from runyard.db import crons as crons_db
from runyard.db import run_claims, run_recovery, run_stats
from runyard.db import runs as runs_db
from runyard.db import threads as threads_db
from runyard.db.engine import create_engine
from runyard.db.schema import migrate
from runyard.db.tables import metadata

log = logging.getLogger("bench")

ADMIN_URL = os.environ.get("RUNYARD_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/postgres")
# The indexes migration 0011 adds (kept in runyard/db/tables.py like every other index).
SCALE_INDEXES = (
    "ix_threads_metadata",
    "ix_threads_updated_at",
    "ix_assistants_metadata",
    "ix_crons_metadata",
)
LAST_THREAD = "md5('thread-' || {n})::uuid::text"

Query = Callable[[AsyncConnection], Awaitable[Any]]


def _threads(query: threads_db.ThreadQuery, sort_by: str) -> Query:
    # limit 11: the route asks one more than the page to know whether another follows.
    return lambda s: threads_db.search_threads(
        s, query, sort_by=sort_by, descending=True, limit=11, offset=0
    )


def _count(query: threads_db.ThreadQuery) -> Query:
    return lambda s: threads_db.count_threads(s, query)


def _owner(owner: str) -> threads_db.ThreadQuery:
    return threads_db.ThreadQuery(auth_filter={"owner": owner})


def routes(last_thread_id: str) -> dict[str, Query]:
    """Each measured request, by name: what the route or engine loop runs on the database."""
    everyone = threads_db.ThreadQuery()
    page = assistants_db.AssistantPage(
        graph_id=None, name=None, metadata=None, auth_filter={"owner": TYPICAL_OWNER},
        limit=10, offset=0, sort_by="created_at", descending=True,
    )  # fmt: skip
    crons = crons_db.CronQuery(auth_filter={"owner": TYPICAL_OWNER})
    return {
        "threads: search by owner with 1 old thread": _threads(_owner(LONE_OWNER), "created_at"),
        "threads: newest 10 by updated_at": _threads(everyone, "updated_at"),
        "threads: an owner's 10 newest by updated_at": _threads(
            _owner(TYPICAL_OWNER), "updated_at"
        ),
        "threads: heaviest owner's 10 newest by updated_at": _threads(
            _owner(HEAVY_OWNER), "updated_at"
        ),
        "threads: count by owner": _count(_owner(TYPICAL_OWNER)),
        "threads: count by heaviest owner": _count(_owner(HEAVY_OWNER)),
        "threads: newest 10 by created_at": _threads(everyone, "created_at"),
        "threads: search by metadata": _threads(
            threads_db.ThreadQuery(metadata={"owner": TYPICAL_OWNER}), "created_at"
        ),
        "threads: count all": _count(everyone),
        "runs: a thread's 10 newest": lambda s: runs_db.list_runs(s, last_thread_id, 10, 0, None),
        "assistants: search by owner": lambda s: assistants_db.search_assistants(s, page),
        "crons: search by owner": lambda s: crons_db.search_crons(
            s, crons, sort_by="created_at", descending=True, limit=10, offset=0
        ),
        "engine: pending runs (sweeper)": lambda s: run_recovery.pending_run_ids(s, 100),
        "engine: stranded pending runs": lambda s: run_recovery.stranded_pending_runs(s, 30, 100),
        "engine: find a claimable run": run_claims.find_claimable_run,
        "engine: reaper (expired leases)": lambda s: run_recovery.requeue_expired(s, 3),
        "engine: queue stats": run_stats.queue_stats,
        "engine: expired threads (TTL)": lambda s: threads_db.claim_expired_threads(s, 100, 60),
    }


async def time_routes(engine: AsyncEngine, last: str, repeat: int) -> dict[str, dict[str, float]]:
    """p50 and p99 (ms) of each route, each call in a transaction rolled back."""
    figures = {}
    for name, query in routes(last).items():
        samples = []
        async with engine.connect() as session:
            for _ in range(repeat + 2):
                start = time.perf_counter()
                await query(session)
                samples.append((time.perf_counter() - start) * 1000)
                await session.rollback()
        samples = sorted(samples[2:])  # the first two warm the plan cache and the pages
        figures[name] = {
            "p50_ms": round(statistics.median(samples), 2),
            "p99_ms": round(samples[min(len(samples) - 1, int(len(samples) * 0.99))], 2),
        }
    return figures


async def time_writes(engine: AsyncEngine, writes: int, tag: str) -> dict[str, float]:
    """Median ms of an insert and of an update of a thread, each in its own transaction, as
    a request makes them: insert_thread, then set_metadata and mark_busy on the new rows
    (the median, not the mean: a busy host's pauses land on either side at random)."""
    ids = [f"{tag}-{uuid.uuid4()}" for _ in range(writes)]
    row = {"metadata": {"owner": TYPICAL_OWNER, "graph_id": "agent"}, "config": {}}
    inserts, updates = [], []
    for thread_id in ids:
        start = time.perf_counter()
        async with engine.begin() as s:
            await threads_db.insert_thread(s, {**row, "thread_id": thread_id, "interrupts": {}})
        inserts.append(time.perf_counter() - start)
    for thread_id in ids:
        start = time.perf_counter()
        async with engine.begin() as s:
            await threads_db.set_metadata(s, thread_id, {"owner": HEAVY_OWNER, "title": "x"})
            await threads_db.mark_busy(s, thread_id, {"owner": HEAVY_OWNER}, {})
        updates.append(time.perf_counter() - start)
    return {
        "insert_ms": round(statistics.median(inserts) * 1000, 3),
        "update_ms": round(statistics.median(updates) * 1000, 3),
    }


async def write_cost(engine: AsyncEngine, url: str, args: argparse.Namespace) -> dict[str, Any]:
    """Writes without, then with, the indexes, `write_rounds` times in turn (dropped and
    built again between), so the host's drift weighs on both alike; the medians and their
    ratio."""
    sides: dict[str, list[dict[str, float]]] = {"without": [], "with": []}
    for round_ in range(args.write_rounds):
        _sql(url, *(f"DROP INDEX {index}" for index in SCALE_INDEXES))
        sides["without"].append(await time_writes(engine, args.writes, f"w{round_}"))
        _sql(url, *index_ddl())
        sides["with"].append(await time_writes(engine, args.writes, f"i{round_}"))
    medians = {
        side: {key: round(statistics.median(r[key] for r in runs), 3) for key in runs[0]}
        for side, runs in sides.items()
    }
    ratio = {
        key: round(medians["with"][key] / medians["without"][key], 2) for key in medians["with"]
    }
    return {
        "writes_without": medians["without"],
        "writes_with": medians["with"],
        "write_ratio": ratio,
    }


def _sql(database_url: str, *statements: str | tuple[str, dict[str, object]]) -> None:
    with psycopg.connect(
        database_url, autocommit=True, cursor_factory=psycopg.ClientCursor
    ) as conn:
        for statement in statements:
            text, params = statement if isinstance(statement, tuple) else (statement, None)
            conn.execute(text, params)  # type: ignore[arg-type]


def index_ddl() -> list[str]:
    """CREATE INDEX of each of `SCALE_INDEXES`, from the table definitions."""
    found = {str(ix.name): ix for table in metadata.tables.values() for ix in table.indexes}
    dialect = postgresql.dialect()
    return [str(CreateIndex(found[name]).compile(dialect=dialect)) for name in SCALE_INDEXES]


async def measure(size: int, args: argparse.Namespace) -> dict[str, Any]:
    """Fill a database with `size` threads; time every route without, then with, the indexes."""
    name = f"runyard_scale_{uuid.uuid4().hex[:10]}"
    _sql(ADMIN_URL, f'CREATE DATABASE "{name}"')
    # What the indexes add is CPU and WAL, not flushes (still one per commit): without
    # waiting for the flush, the host's disk does not drown it.
    _sql(ADMIN_URL, f'ALTER DATABASE "{name}" SET synchronous_commit = off')
    url = f"{ADMIN_URL.rsplit('/', 1)[0]}/{name}"
    engine = create_engine(url, pool_size=2)
    try:
        await migrate(engine)
        _sql(url, *(f"DROP INDEX IF EXISTS {index}" for index in SCALE_INDEXES))
        start = time.perf_counter()
        volumes = Volumes(threads=size, runs_per_thread=args.runs_per_thread)
        _sql(url, *fill_statements(volumes), "VACUUM ANALYZE")
        log.info("filled size=%d seconds=%.1f", size, time.perf_counter() - start)
        last = await _scalar(engine, f"SELECT {LAST_THREAD.format(n=size)}")
        result: dict[str, Any] = {"scenario": "data_scale", "threads": size}
        if not (args.only_indexed or args.writes_only):
            result["without"] = await time_routes(engine, last, args.repeat)
        start = time.perf_counter()
        _sql(url, *index_ddl(), "ANALYZE")
        result["index_build_s"] = round(time.perf_counter() - start, 1)
        if not args.writes_only:
            result["with"] = await time_routes(engine, last, args.repeat)
        if not args.only_indexed:
            result.update(await write_cost(engine, url, args))
        return result
    finally:
        await engine.dispose()
        _sql(ADMIN_URL, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


async def _scalar(engine: AsyncEngine, sql: str) -> Any:
    from sqlalchemy import text

    async with engine.connect() as session:
        return (await session.execute(text(sql))).scalar_one()


def table(results: list[dict[str, Any]]) -> str:
    """Markdown: each route's p50 (p99) in ms with the indexes, at each size."""
    sizes = [f"{r['threads']:,} threads" for r in results]
    lines = ["| request | " + " | ".join(sizes) + " |", "|---" * (len(sizes) + 1) + "|"]
    for route in results[0]["with"]:
        cells = []
        for r in results:
            now = r["with"][route]
            cell = f"{now['p50_ms']} ({now['p99_ms']})"
            if "without" in r:
                cell += f" [without: {r['without'][route]['p50_ms']}]"
            cells.append(cell)
        lines.append(f"| {route} | " + " | ".join(cells) + " |")
    for r in results:
        if "write_ratio" in r:
            lines.append(
                f"\n{r['threads']:,} threads: writes with/without the indexes "
                f"{r['writes_with']} / {r['writes_without']} = {r['write_ratio']}"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run every size in turn; one JSON line each, the table at the end."""
    parser = argparse.ArgumentParser(prog="python -m bench.data_scale", description=__doc__)
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--repeat", type=int, default=30, help="calls per route and size")
    parser.add_argument("--writes", type=int, default=1000, help="threads inserted and updated")
    parser.add_argument("--write-rounds", type=int, default=5, help="without/with turns")
    parser.add_argument("--runs-per-thread", type=float, default=1.0)
    parser.add_argument(
        "--only-indexed", action="store_true", help="skip the legs without the indexes"
    )
    parser.add_argument("--writes-only", action="store_true", help="time no request")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(message)s")
    log.setLevel(logging.INFO)
    results = []
    for size in (int(s) for s in args.sizes.split(",")):
        results.append(asyncio.run(measure(size, args)))
        print(json.dumps(results[-1]), flush=True)
    if not args.writes_only:
        print(table(results), file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
