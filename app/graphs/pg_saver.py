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

A checkpoint holding a channel value that is a tuple (a NamedTuple is how the library
marks delta-channel snapshots, which it stores differently) goes through the library's
own `aput` unchanged. Imported only when the database is PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    get_serializable_checkpoint_metadata,
)
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from psycopg.types.json import Jsonb

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


class LeanPostgresSaver(AsyncPostgresSaver):
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
        params: tuple[Any, ...] = (
            thread_id,
            checkpoint_ns,
            checkpoint["id"],
            conf.get("checkpoint_id"),
            Jsonb({**checkpoint, "channel_values": inline}),
            Jsonb(get_serializable_checkpoint_metadata(config, metadata)),
        )
        versions = {k: v for k, v in new_versions.items() if k in blobs}
        if versions:
            rows = self._dump_blobs(thread_id, checkpoint_ns, blobs, versions)
            columns = [[row[i] for row in rows] for i in (2, 3, 4, 5)]
            query = _BLOBS_CTE + query
            params = (thread_id, checkpoint_ns, *columns, *params)
        async with self._cursor() as cur:
            await cur.execute(query, params)
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
        """Store a task's writes: one plain statement for a single write."""
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
        if len(rows) == 1:
            async with self._cursor() as cur:
                await cur.execute(query, rows[0])
        elif rows:
            async with self._cursor(pipeline=True) as cur:
                await cur.executemany(query, rows)
