"""The dev (SQLite) checkpoint saver: the library's, with writes fenced by the run's attempt.

Runyard's database is attached to the saver's connection, so a fenced write reads the run
row in its own statement (runyard/db/checkpoints.py): `INSERT … SELECT … WHERE EXISTS`.
The transaction writes only the checkpoint file; it reads the runs file (WAL) without a
write lock there, so API transactions on the runs file and checkpoint writes never wait
for each other.
"""

from __future__ import annotations

import copy
import json
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

from langgraph.checkpoint.base import (
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    get_checkpoint_metadata,
)
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

from runyard.checkpoints.encrypted_checkpoints import naming_checkpoint
from runyard.checkpoints.saved_rows import saved_config, write_rows
from runyard.db import checkpoints as sql
from runyard.db.sqlite_checkpoints import (
    attach_runs,
    delete_checkpoints,
    delete_checkpoints_by_id,
    keep_latest_checkpoints,
    thread_storage,
)
from runyard.domain.errors import StaleAttemptError


class SqliteSaver(AsyncSqliteSaver):
    """langgraph-checkpoint-sqlite's saver, plus `fenced_to` for a run's own writes."""

    # (run id, attempt) whose hold every write is conditional on (`fenced_to`).
    fence: tuple[str, int] | None = None
    # Encryption at rest: the metadata's configured JSON keys (the serializer encrypts
    # the checkpoint and writes themselves).
    json_codec: Any = None

    async def aget_tuple(self, config: Any) -> Any:
        """The library's read; metadata decrypted, a decryption error naming the checkpoint."""
        if self.json_codec is None:
            return await super().aget_tuple(config)
        conf = config["configurable"]
        with naming_checkpoint(
            str(conf["thread_id"]),
            conf.get("checkpoint_ns", ""),
            conf.get("checkpoint_id") or "(latest)",
        ):
            found = await super().aget_tuple(config)
            return None if found is None else self._decrypted(found)

    async def alist(self, config: Any, **kwargs: Any) -> AsyncIterator[Any]:
        """The library's listing; metadata decrypted, a decryption error naming the thread."""
        listing = super().alist(config, **kwargs)
        if self.json_codec is None:
            async for item in listing:
                yield item
            return
        thread_id = str(((config or {}).get("configurable") or {}).get("thread_id", "(any)"))
        with naming_checkpoint(thread_id, "", "(listing)"):
            async for item in listing:
                yield self._decrypted(item)

    def _decrypted(self, item: CheckpointTuple) -> CheckpointTuple:
        return item._replace(metadata=self.json_codec.decrypt(item.metadata))

    async def attach_runs(self, database: Path) -> None:
        """Attach Runyard's database (where the runs are) for fenced writes to read."""
        await attach_runs(self.conn, database)

    async def adelete_checkpoints(self, thread_id: str, checkpoint_ids: Sequence[str]) -> None:
        """Delete these checkpoints of a thread and their writes (as the PostgreSQL saver)."""
        async with self.lock:
            await delete_checkpoints_by_id(self.conn, thread_id, checkpoint_ids)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """Keep only each namespace's newest checkpoint, or (`delete`) none: the library's
        SQLite saver lacks `aprune`, which the PostgreSQL one offers."""
        async with self.lock:
            if strategy == "delete":
                await delete_checkpoints(self.conn, thread_ids)
            else:
                await keep_latest_checkpoints(self.conn, thread_ids)

    async def athread_storage(self, thread_id: str) -> dict[str, Any]:
        """Counts and bytes of the thread's checkpoints and pending writes."""
        async with self.lock:
            return await thread_storage(self.conn, thread_id)

    def fenced_to(self, run_id: str, attempt: int) -> SqliteSaver:
        """A copy whose writes are made only while `attempt` holds the run (StaleAttemptError
        otherwise), each checked in its own statement."""
        view = copy.copy(self)
        view.fence = (run_id, attempt)
        return view

    async def aput(
        self,
        config: Any,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> Any:
        """Save a checkpoint (in the library's format), fenced when the copy is."""
        if self.fence is None and self.json_codec is None:
            return await super().aput(config, checkpoint, metadata, new_versions)
        conf = config["configurable"]
        thread_id, checkpoint_ns = str(conf["thread_id"]), conf["checkpoint_ns"]
        kind, blob = self.serde.dumps_typed(checkpoint)
        saved = get_checkpoint_metadata(config, metadata)
        if self.json_codec is not None:
            saved = self.json_codec.encrypt(saved)
        saved_metadata = json.dumps(saved, ensure_ascii=False).encode("utf-8", "ignore")
        row = (
            thread_id,
            checkpoint_ns,
            checkpoint["id"],
            conf.get("checkpoint_id"),
            kind,
            blob,
            saved_metadata,
        )
        if self.fence is None:
            await self._write_unfenced(sql.SQLITE_CHECKPOINT, row)
        else:
            await self._write(sql.SQLITE_FENCED_CHECKPOINT, [row])
        return saved_config(thread_id, checkpoint_ns, checkpoint["id"])

    async def aput_writes(
        self,
        config: Any,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Store a task's writes (in the library's format), fenced when the copy is."""
        if self.fence is None:
            await super().aput_writes(config, writes, task_id, task_path)
            return
        if not writes:
            return
        special, rows = write_rows(config, writes, task_id, task_path, self.serde.dumps_typed)
        query = sql.SQLITE_FENCED_REPLACE_WRITES if special else sql.SQLITE_FENCED_KEEP_WRITES
        await self._write(query, rows)

    async def _write(self, query: str, rows: list[tuple[Any, ...]]) -> None:
        """Each row written only while the fence holds; StaleAttemptError when it does not."""
        assert self.fence is not None
        await self.setup()
        async with self.lock:
            try:
                cursor = await self.conn.executemany(query, [(*row, *self.fence) for row in rows])
                # Fewer rows than given: refused, or rows kept as first written. Ask.
                held = cursor.rowcount >= len(rows) or await self._holds()
                await self.conn.commit()
            except BaseException:
                await self.conn.rollback()
                raise
        if not held:
            run_id, attempt = self.fence
            raise StaleAttemptError(
                f"attempt {attempt} of run {run_id} is no longer current; checkpoint write refused"
            )

    async def _write_unfenced(self, query: str, row: tuple[Any, ...]) -> None:
        await self.setup()
        async with self.lock:
            try:
                await self.conn.execute(query, row)
                await self.conn.commit()
            except BaseException:
                await self.conn.rollback()
                raise

    async def _holds(self) -> bool:
        assert self.fence is not None
        async with self.conn.execute(sql.SQLITE_STILL_HOLDS, self.fence) as cursor:
            return await cursor.fetchone() is not None
