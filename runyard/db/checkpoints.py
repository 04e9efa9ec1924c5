"""SQL of the checkpoint savers: LangGraph's checkpoint tables, and the fenced writes of a run.

The PostgreSQL statements are asyncpg SQL (`$1`, `$2`…) sent through the statement pool by
runyard/checkpoints/pg_saver.py; the SQLite ones are for the dev saver
(runyard/checkpoints/sqlite_saver.py), whose connection has Runyard's database attached as
`runyard`.

A fenced write is conditional on the attempt still holding the run, in the write's own
statement: a `fence` CTE reads the run row `FOR SHARE` (so a claim or an end committing
meanwhile is waited for and its new row re-checked), the insert reads the fence, and the
statement answers whether the fence held. Nothing is written for an attempt that lost the
run, however recently it last knew it held it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# One checkpoint with the blobs of its channel versions and its pending writes, each
# aggregated into parallel arrays (an aggregate without GROUP BY always yields one row).
SELECT = """
    SELECT c.thread_id, c.checkpoint_ns, c.checkpoint_id, c.parent_checkpoint_id,
           c.checkpoint, c.metadata,
           b.channels, b.types, b.blobs,
           w.task_ids, w.task_paths, w.idxs,
           w.channels AS write_channels, w.types AS write_types, w.blobs AS write_blobs
    FROM checkpoints AS c
    CROSS JOIN LATERAL (
        SELECT array_agg(s.channel) AS channels, array_agg(s.type) AS types,
               array_agg(s.blob) AS blobs
        FROM jsonb_each_text(c.checkpoint -> 'channel_versions') AS v
        JOIN checkpoint_blobs AS s
          ON s.thread_id = c.thread_id AND s.checkpoint_ns = c.checkpoint_ns
         AND s.channel = v.key AND s.version = v.value
    ) AS b
    CROSS JOIN LATERAL (
        SELECT array_agg(x.task_id) AS task_ids, array_agg(x.task_path) AS task_paths,
               array_agg(x.idx) AS idxs, array_agg(x.channel) AS channels,
               array_agg(x.type) AS types, array_agg(x.blob) AS blobs
        FROM checkpoint_writes AS x
        WHERE x.thread_id = c.thread_id AND x.checkpoint_ns = c.checkpoint_ns
          AND x.checkpoint_id = c.checkpoint_id
    ) AS w
"""
SELECT_ONE = SELECT + " WHERE c.thread_id = $1 AND c.checkpoint_ns = $2 AND c.checkpoint_id = $3"
SELECT_LATEST = (
    SELECT
    + " WHERE c.thread_id = $1 AND c.checkpoint_ns = $2 ORDER BY c.checkpoint_id DESC LIMIT 1"
)

_ON_CHECKPOINT_CONFLICT = """
    ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id)
    DO UPDATE SET checkpoint = EXCLUDED.checkpoint, metadata = EXCLUDED.metadata
"""
UPSERT_CHECKPOINT = (
    """
    INSERT INTO checkpoints
        (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint, metadata)
    VALUES ($1, $2, $3, $4, $5, $6)
    """
    + _ON_CHECKPOINT_CONFLICT
)
# A blob is keyed by its channel's version: one already stored is the same value.
_INSERT_BLOBS = """
    INSERT INTO checkpoint_blobs (thread_id, checkpoint_ns, channel, version, type, blob)
    SELECT $1, $2, b.channel, b.version, b.type, b.blob
    FROM unnest($7::text[], $8::text[], $9::text[], $10::bytea[])
        AS b(channel, version, type, blob)
    {where}
    ON CONFLICT (thread_id, checkpoint_ns, channel, version) DO NOTHING
"""
UPSERT_CHECKPOINT_AND_BLOBS = (
    "WITH blobs AS (" + _INSERT_BLOBS.format(where="") + ")" + UPSERT_CHECKPOINT
)
_INSERT_WRITES = """
    INSERT INTO checkpoint_writes
        (thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, type, blob)
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
    ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, idx)
"""
# A task's ordinary writes are kept as first written; its special writes (errors,
# interrupts, resume values: fixed negative indexes) replace the ones before them.
_KEEP = " DO NOTHING"
_REPLACE = " DO UPDATE SET channel = EXCLUDED.channel, type = EXCLUDED.type, blob = EXCLUDED.blob"
KEEP_WRITES = _INSERT_WRITES + _KEEP
REPLACE_WRITES = _INSERT_WRITES + _REPLACE
DELETE_THREAD = """
    WITH writes AS (DELETE FROM checkpoint_writes WHERE thread_id = $1),
         blobs AS (DELETE FROM checkpoint_blobs WHERE thread_id = $1)
    DELETE FROM checkpoints WHERE thread_id = $1
"""
DELETE_CHECKPOINTS = """
    WITH writes AS (
        DELETE FROM checkpoint_writes WHERE thread_id = $1 AND checkpoint_id = ANY($2::text[])
    )
    DELETE FROM checkpoints WHERE thread_id = $1 AND checkpoint_id = ANY($2::text[])
"""


# --- fenced writes (PostgreSQL) -------------------------------------------------------------


def _fence(run_param: int) -> str:
    """The CTE that finds the run row while attempt `$run_param + 1` holds it."""
    return f"""
    fence AS (
        SELECT 1 FROM runs
        WHERE run_id = ${run_param}::text AND attempt = ${run_param + 1}::int
          AND status = 'running'
        FOR SHARE
    )"""


_HELD = " SELECT EXISTS (SELECT 1 FROM fence) AS held"
_IF_HELD = "WHERE EXISTS (SELECT 1 FROM fence)"
_FENCED_CHECKPOINT = (
    """
    saved AS (
        INSERT INTO checkpoints
            (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint, metadata)
        SELECT $1::text, $2::text, $3::text, $4::text, $5::jsonb, $6::jsonb
    """
    + _IF_HELD
    + _ON_CHECKPOINT_CONFLICT
    + ")"
)
# Parameters as UPSERT_CHECKPOINT, then the run id and attempt ($7, $8): one row, `held`.
FENCED_UPSERT_CHECKPOINT = "WITH" + _fence(7) + "," + _FENCED_CHECKPOINT + _HELD
# Parameters as UPSERT_CHECKPOINT_AND_BLOBS, then the run id and attempt ($11, $12).
FENCED_UPSERT_CHECKPOINT_AND_BLOBS = (
    "WITH"
    + _fence(11)
    + ", blobs AS ("
    + _INSERT_BLOBS.format(where=_IF_HELD).replace("SELECT $1, $2", "SELECT $1::text, $2::text")
    + "),"
    + _FENCED_CHECKPOINT
    + _HELD
)
# A task's writes in one statement: thread, namespace, checkpoint, task, path ($1-$5), then
# parallel arrays of index, channel, type and blob ($6-$9), then run id and attempt ($10,
# $11). One row, `held`.
_FENCED_WRITES = (
    "WITH"
    + _fence(10)
    + """,
    written AS (
        INSERT INTO checkpoint_writes
            (thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, type, blob)
        SELECT $1::text, $2::text, $3::text, $4::text, $5::text,
               w.idx, w.channel, w.type, w.blob
        FROM unnest($6::int[], $7::text[], $8::text[], $9::bytea[]) AS w(idx, channel, type, blob)
    """
    + _IF_HELD
    + """
        ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, idx){conflict}
    )"""
    + _HELD
)
FENCED_KEEP_WRITES = _FENCED_WRITES.format(conflict=_KEEP)
FENCED_REPLACE_WRITES = _FENCED_WRITES.format(conflict=_REPLACE)
# For what the library's saver writes (it cannot take the fence into its statements): the
# check runs just before, the one place a fenced write is not in the same statement.
STILL_HOLDS = "WITH" + _fence(1) + _HELD


# --- fenced writes (SQLite: the dev saver, Runyard's database attached as `runyard`) --------

SQLITE_ATTACHED = "runyard"
SQLITE_STILL_HOLDS = (
    "SELECT 1 FROM runyard.runs WHERE run_id = ? AND attempt = ? AND status = 'running'"
)
_SQLITE_IF_HELD = (
    " WHERE EXISTS (SELECT 1 FROM runyard.runs"
    " WHERE run_id = ? AND attempt = ? AND status = 'running')"
)
# The library's formats (langgraph-checkpoint-sqlite), with the run id and attempt last.
# The same, unfenced (writes outside a run: state updates, copies).
SQLITE_CHECKPOINT = (
    "INSERT OR REPLACE INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, "
    "parent_checkpoint_id, type, checkpoint, metadata) VALUES (?, ?, ?, ?, ?, ?, ?)"
)
SQLITE_FENCED_CHECKPOINT = (
    "INSERT OR REPLACE INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, "
    "parent_checkpoint_id, type, checkpoint, metadata) SELECT ?, ?, ?, ?, ?, ?, ?" + _SQLITE_IF_HELD
)
_SQLITE_WRITES = (
    " INTO writes (thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, "
    "channel, type, value) SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?" + _SQLITE_IF_HELD
)
SQLITE_FENCED_KEEP_WRITES = "INSERT OR IGNORE" + _SQLITE_WRITES
SQLITE_FENCED_REPLACE_WRITES = "INSERT OR REPLACE" + _SQLITE_WRITES


# --- the library's schema migrations, as its setup() records them --------------------------

MIGRATIONS_DONE = "SELECT max(v) AS v FROM checkpoint_migrations"
MIGRATION_RECORD = "INSERT INTO checkpoint_migrations (v) VALUES ($1)"


# --- storage of a thread (GET /threads/{thread_id}/storage) -----------------------------------

STORAGE_CHECKPOINTS = """
    SELECT count(*) AS n,
           coalesce(sum(pg_column_size(checkpoint) + pg_column_size(metadata)), 0) AS size
    FROM checkpoints WHERE thread_id = $1
"""
STORAGE_BLOBS = """
    SELECT channel, count(*) AS n, coalesce(sum(octet_length(blob)), 0) AS size
    FROM checkpoint_blobs WHERE thread_id = $1 GROUP BY channel
"""
STORAGE_WRITES = """
    SELECT count(*) AS n, coalesce(sum(octet_length(blob)), 0) AS size
    FROM checkpoint_writes WHERE thread_id = $1
"""


def storage_report(
    checkpoints: tuple[int, int], by_channel: dict[str, tuple[int, int]], writes: tuple[int, int]
) -> dict[str, Any]:
    """Counts and bytes in the shape LangGraph's server answers GET /threads/{id}/storage."""
    channel_bytes = sum(size for _, size in by_channel.values())
    return {
        "total_bytes": checkpoints[1] + channel_bytes + writes[1],
        "checkpoints": {"count": checkpoints[0], "bytes": checkpoints[1]},
        "channel_values": {
            "count": sum(count for count, _ in by_channel.values()),
            "bytes": channel_bytes,
            "by_channel": {
                channel: {"versions": count, "bytes": size}
                for channel, (count, size) in sorted(by_channel.items())
            },
        },
        "pending_writes": {"count": writes[0], "bytes": writes[1]},
    }


# The conditions `list_query` may combine, by name.
_LIST_CONDITIONS = {
    "thread_id": "c.thread_id = ?",
    "checkpoint_ns": "c.checkpoint_ns = ?",
    "checkpoint_id": "c.checkpoint_id = ?",
    "metadata": "c.metadata @> ?::jsonb",
    "before": "c.checkpoint_id < ?",
}


def list_query(matches: Mapping[str, Any], limit: int | None) -> tuple[str, list[Any]]:
    """`SELECT` of the checkpoints meeting every named condition (thread_id, checkpoint_ns,
    checkpoint_id, metadata as JSON to contain, before a checkpoint id), newest first, and
    its arguments in order."""
    where: list[str] = []
    args: list[Any] = []
    for name, value in matches.items():
        args.append(value)
        where.append(_LIST_CONDITIONS[name].replace("?", f"${len(args)}"))
    query = SELECT + (" WHERE " + " AND ".join(where) if where else "")
    query += " ORDER BY c.checkpoint_id DESC" + (f" LIMIT {int(limit)}" if limit else "")
    return query, args
