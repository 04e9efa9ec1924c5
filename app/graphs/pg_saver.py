"""The PostgreSQL checkpoint saver, writing with fewer round trips and no thread hops.

`LeanPostgresSaver` is langgraph-checkpoint-postgres's `AsyncPostgresSaver`, with the same
tables, serializer, SQL and read path. Only its two writes differ, because for the small
checkpoints of most runs their machinery cost more CPU than the database work:

- `aput` sends a checkpoint and its blobs as one statement (a data-modifying CTE inserts
  the blobs ahead of the saver's own checkpoint upsert), instead of a pipeline of two;
- `aput_writes` sends a task's single write as one plain statement, outside pipeline mode
  (several writes still go as one pipelined batch);
- both serialize on the event loop: in a worker thread the work holds the GIL all the
  same, and the hop itself costs about 40 µs.

Given Runyard's statement pool (`statements`), both writes, the read of one checkpoint
(`aget_tuple`) and the deletion of a thread go to asyncpg on its connections instead of
through the psycopg pool: per statement about 50 µs less CPU, and none of psycopg's per-wait
reader registration. Listing, pruning, delta-channel history and the tables' setup stay on
psycopg.

A checkpoint holding a channel value that is a tuple (a NamedTuple is how the library
marks delta-channel snapshots, which it stores differently) goes through the library's
own `aput` unchanged. Imported only when the database is PostgreSQL.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from functools import cache
from typing import TYPE_CHECKING, Any

from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    get_checkpoint_id,
    get_serializable_checkpoint_metadata,
)
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from psycopg.types.json import Jsonb

if TYPE_CHECKING:
    from app.db.driver import StatementPool

# Prefixed to the saver's checkpoint upsert: the blobs are written by the same statement.
_BLOBS_CTE = """
    WITH blobs AS (
        INSERT INTO checkpoint_blobs (thread_id, checkpoint_ns, channel, version, type, blob)
        SELECT %s, %s, b.channel, b.version, b.type, b.blob
        FROM unnest(%s::text[], %s::text[], %s::text[], %s::bytea[])
            AS b(channel, version, type, blob)
        ON CONFLICT (thread_id, checkpoint_ns, channel, version) DO NOTHING
    )
"""
_INLINE = (str, int, float, bool)
# The library deletes a thread's rows with three statements in a pipeline; one will do.
_DELETE_THREAD = """
    WITH writes AS (DELETE FROM checkpoint_writes WHERE thread_id = $1),
         blobs AS (DELETE FROM checkpoint_blobs WHERE thread_id = $1)
    DELETE FROM checkpoints WHERE thread_id = $1
"""


@cache
def _numbered(sql: str) -> str:
    """psycopg's `%s` placeholders as asyncpg's `$1`, `$2`… (the saver's SQL has no other %)."""
    pieces = sql.split("%s")
    return "".join(
        piece + (f"${index}" if index < len(pieces) else "")
        for index, piece in enumerate(pieces, start=1)
    )


def _json(value: Any) -> str:
    # What psycopg's Jsonb sends: the json module's text of the value.
    return json.dumps(value)


class LeanPostgresSaver(AsyncPostgresSaver):
    # Set by open_checkpointer: where the two writes go, and who counts their statements.
    statements: StatementPool | None = None
    on_statements: Callable[[int], None] | None = None

    async def _write(self, query: str, rows: Sequence[Sequence[Any]]) -> None:
        """Send one statement per row: through the statement pool when there is one."""
        if self.statements is None:
            if len(rows) == 1:
                async with self._cursor() as cur:
                    await cur.execute(query, rows[0])
            else:
                async with self._cursor(pipeline=True) as cur:
                    await cur.executemany(query, rows)
            return
        if self.on_statements is not None:
            self.on_statements(len(rows))
        if len(rows) == 1:
            await self.statements.execute(_numbered(query), rows[0])
        else:
            await self.statements.execute_many(_numbered(query), rows)

    async def adelete_thread(self, thread_id: str) -> None:
        """Delete a thread's checkpoints, blobs and writes."""
        if self.statements is None:
            await super().adelete_thread(thread_id)
            return
        if self.on_statements is not None:
            self.on_statements(1)
        await self.statements.execute(_DELETE_THREAD, (str(thread_id),))

    async def aget_tuple(self, config: Any) -> CheckpointTuple | None:
        """The checkpoint the config names, or the thread's latest: the library's query."""
        if self.statements is None:
            return await super().aget_tuple(config)
        conf = config["configurable"]
        args: tuple[Any, ...] = (conf["thread_id"], conf.get("checkpoint_ns", ""))
        checkpoint_id = get_checkpoint_id(config)
        where = "WHERE thread_id = %s AND checkpoint_ns = %s"
        if checkpoint_id:
            args = (*args, checkpoint_id)
            where += " AND checkpoint_id = %s"
        else:
            where += " ORDER BY checkpoint_id DESC LIMIT 1"
        if self.on_statements is not None:
            self.on_statements(1)
        rows = await self.statements.fetch_sql(_numbered(self.SELECT_SQL + where), args)
        if not rows:
            return None
        value = rows[0]
        if value["checkpoint"]["v"] < 4 and value["parent_checkpoint_id"]:
            # Written by an older format: the library migrates its pending sends.
            return await super().aget_tuple(config)
        return await self._load_checkpoint_tuple(value)  # type: ignore[arg-type]

    async def aput(
        self,
        config: Any,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> Any:
        """Save a checkpoint and its new blobs in one statement."""
        values = checkpoint["channel_values"]
        if any(isinstance(value, tuple) for value in values.values()):
            return await super().aput(config, checkpoint, metadata, new_versions)
        conf = config["configurable"]
        thread_id, checkpoint_ns = conf["thread_id"], conf["checkpoint_ns"]
        # Primitives stay in the checkpoint row; anything else is a blob, keyed by version.
        inline = {k: v for k, v in values.items() if v is None or isinstance(v, _INLINE)}
        blobs = {k: v for k, v in values.items() if k not in inline}
        query = self.UPSERT_CHECKPOINTS_SQL
        as_json: Callable[[Any], Any] = Jsonb if self.statements is None else _json
        params: tuple[Any, ...] = (
            thread_id,
            checkpoint_ns,
            checkpoint["id"],
            conf.get("checkpoint_id"),
            as_json({**checkpoint, "channel_values": inline}),
            as_json(get_serializable_checkpoint_metadata(config, metadata)),
        )
        versions = {k: v for k, v in new_versions.items() if k in blobs}
        if versions:
            rows = self._dump_blobs(thread_id, checkpoint_ns, blobs, versions)
            # Versions may be integers; the column is text (asyncpg does not cast for us).
            columns = [
                [row[2] for row in rows],
                [str(row[3]) for row in rows],
                [row[4] for row in rows],
                [row[5] for row in rows],
            ]
            query = _BLOBS_CTE + query
            params = (thread_id, checkpoint_ns, *columns, *params)
        await self._write(query, [params])
        return {
            "configurable": {
                "thread_id": thread_id,
                "checkpoint_ns": checkpoint_ns,
                "checkpoint_id": checkpoint["id"],
            }
        }

    async def aput_writes(
        self,
        config: Any,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Store a task's writes: one plain statement for a single write, several rows in
        one round trip."""
        conf = config["configurable"]
        special = all(channel in WRITES_IDX_MAP for channel, _ in writes)
        query = self.UPSERT_CHECKPOINT_WRITES_SQL if special else self.INSERT_CHECKPOINT_WRITES_SQL
        rows = self._dump_writes(
            conf["thread_id"],
            conf["checkpoint_ns"],
            conf["checkpoint_id"],
            task_id,
            task_path,
            writes,
        )
        if rows:
            await self._write(query, rows)
