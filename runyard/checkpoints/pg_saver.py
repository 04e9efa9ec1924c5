"""The PostgreSQL checkpoint saver: LangGraph's tables and formats, without psycopg at hand.

`PostgresSaver` keeps its checkpoints in the tables of langgraph-checkpoint-postgres, in the
library's formats (the same rows, serializer and channel versions), so either saver reads
what the other wrote. What a run does goes as one statement each through Runyard's
statement pool (asyncpg): read a checkpoint, write a checkpoint with its blobs (a
data-modifying CTE inserts the blobs ahead of the checkpoint upsert), write a task's
writes, delete a thread; listing (thread history) is one statement too. The SQL is in
runyard/db/checkpoints.py, the rows' conversions in pg_rows.py. A run writes through
`fenced_to(run_id, attempt)`, whose writes carry the fence in the same statement.
Serialization stays on the event loop: in a worker thread it would hold the GIL all the
same, and the hop itself costs about 40 µs.

The rest is handed to the library's own `AsyncPostgresSaver` (pg_library.py), opened on
first need: pruning, delta-channel history, checkpoints in the format older than v4 (whose
pending sends the library migrates) and checkpoints holding a delta-channel snapshot.
psycopg and the library's saver cost an instance about 10 MiB of memory, which one that
never needs them does not pay. The tables are set up without them too: the library's
migrations are run here, with the library's own bookkeeping (`checkpoint_migrations`).

Imported only when the database is PostgreSQL.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    get_checkpoint_id,
    get_serializable_checkpoint_metadata,
)

from runyard.checkpoints.encrypted_checkpoints import naming_checkpoint
from runyard.checkpoints.pg_errors import client_data_errors
from runyard.checkpoints.pg_library import LibrarySaver, library_migrations
from runyard.checkpoints.pg_rows import (
    INLINE_TYPES,
    checkpoint_tuple,
    fenced_write_params,
    next_version,
    older_format,
    to_json,
)
from runyard.checkpoints.saved_rows import saved_config, write_rows
from runyard.db import checkpoints as sql
from runyard.domain.errors import StaleAttemptError
from runyard.loop_calls import from_thread

if TYPE_CHECKING:
    from runyard.db.driver import StatementPool


def _unchanged(value: Any) -> Any:
    return value


class PostgresSaver(BaseCheckpointSaver[str]):
    """LangGraph's PostgreSQL checkpoints, a run's statements on asyncpg (see the module)."""

    def __init__(
        self,
        statements: StatementPool,
        conninfo: str,
        pool_size: int = 10,
        on_statements: Callable[[int], None] | None = None,
        serde: Any = None,
        json_codec: Any = None,
    ) -> None:
        super().__init__(serde=serde)
        # Encryption at rest: every channel value is a blob (the serializer encrypts
        # those), none inline in the checkpoint's JSON, and the metadata goes through the
        # engine's JSON codec (runyard/encryption/json_keys.py).
        self.inline: tuple[type, ...] = () if json_codec is not None else INLINE_TYPES
        self.metadata_json: Callable[[Any], str] = json_codec.dumps if json_codec else to_json
        # Custom encryption's metadata decryption (the built-in AES's is the pool's codec).
        self.metadata_read: Callable[[Any], Any] = _unchanged
        self.statements = statements
        self.on_statements = on_statements
        self.loop = asyncio.get_running_loop()
        self.library = LibrarySaver(conninfo, pool_size, on_statements)
        # (run id, attempt) whose hold every write is conditional on (`fenced_to`).
        self.fence: tuple[str, int] | None = None

    def fenced_to(self, run_id: str, attempt: int) -> PostgresSaver:
        """A copy whose writes are made only while `attempt` holds the run (StaleAttemptError
        otherwise), each checked in its own statement."""
        view = copy.copy(self)
        view.fence = (run_id, attempt)
        return view

    # --- set-up -----------------------------------------------------------------------------

    async def setup(self) -> None:
        """Create or migrate the tables, as the library's `setup()` does."""
        migrations = library_migrations()
        await self._execute(migrations[0], ())
        rows = await self._fetch(sql.MIGRATIONS_DONE, ())
        done = rows[0]["v"] if rows and rows[0]["v"] is not None else -1
        for version in range(done + 1, len(migrations)):
            await self._execute(migrations[version], ())
            await self._execute(sql.MIGRATION_RECORD, (version,))

    # --- what a run does: one statement each ------------------------------------------------

    async def aget_tuple(self, config: Any) -> CheckpointTuple | None:
        """The checkpoint the config names, or the thread's latest."""
        conf = config["configurable"]
        thread_id, checkpoint_ns = conf["thread_id"], conf.get("checkpoint_ns", "")
        checkpoint_id = get_checkpoint_id(config)
        if checkpoint_id:
            rows = await self._fetch(sql.SELECT_ONE, (thread_id, checkpoint_ns, checkpoint_id))
        else:
            rows = await self._fetch(sql.SELECT_LATEST, (thread_id, checkpoint_ns))
        if not rows:
            return None
        if older_format(rows[0]):
            # Written in an older format: the library migrates its pending sends.
            library = await self.library.saver(self.serde)
            return await self._cold(library.aget_tuple(config))
        return self._tuple(rows[0])

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
            # A NamedTuple is how the library marks a delta-channel snapshot, which it stores
            # in a way of its own.
            library = await self.library.saver(self.serde)
            await self._ensure_held()
            return await self._cold(library.aput(config, checkpoint, metadata, new_versions))
        conf = config["configurable"]
        thread_id, checkpoint_ns = conf["thread_id"], conf["checkpoint_ns"]
        inline = {k: v for k, v in values.items() if v is None or isinstance(v, self.inline)}
        params: tuple[Any, ...] = (
            thread_id,
            checkpoint_ns,
            checkpoint["id"],
            conf.get("checkpoint_id"),
            to_json({**checkpoint, "channel_values": inline}),
            self.metadata_json(get_serializable_checkpoint_metadata(config, metadata)),
        )
        # A blob for each value that is not inline and has a new version.
        blobs = [(k, v) for k, v in new_versions.items() if k in values and k not in inline]
        if blobs:
            dumps = self.serde.dumps_typed
            typed = [dumps(values[k]) for k, _ in blobs]
            # Versions may be integers; the column is text (asyncpg does not cast for us).
            params += (
                [k for k, _ in blobs],
                [str(version) for _, version in blobs],
                [kind for kind, _ in typed],
                [blob for _, blob in typed],
            )
            if self.fence is None:
                await self._execute(sql.UPSERT_CHECKPOINT_AND_BLOBS, params)
            else:
                await self._fenced(sql.FENCED_UPSERT_CHECKPOINT_AND_BLOBS, params)
        elif self.fence is None:
            await self._execute(sql.UPSERT_CHECKPOINT, params)
        else:
            await self._fenced(sql.FENCED_UPSERT_CHECKPOINT, params)
        return saved_config(thread_id, checkpoint_ns, checkpoint["id"])

    async def aput_writes(
        self,
        config: Any,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Store a task's writes: one statement for one write, several rows in one round
        trip."""
        if not writes:
            return
        special, rows = write_rows(config, writes, task_id, task_path, self.serde.dumps_typed)
        if self.fence is not None:
            await self._fenced_writes(rows, special)
            return
        query = sql.REPLACE_WRITES if special else sql.KEEP_WRITES
        if self.on_statements is not None:
            self.on_statements(len(rows))
        if len(rows) == 1:
            await self.statements.execute(query, rows[0])
        else:
            await self.statements.execute_many(query, rows)

    async def athread_storage(self, thread_id: str) -> dict[str, Any]:
        """Counts and bytes of the thread's checkpoints, channel values and pending writes."""
        checkpoints = (await self._fetch(sql.STORAGE_CHECKPOINTS, (thread_id,)))[0]
        blobs = await self._fetch(sql.STORAGE_BLOBS, (thread_id,))
        writes = (await self._fetch(sql.STORAGE_WRITES, (thread_id,)))[0]
        return sql.storage_report(
            (int(checkpoints["n"]), int(checkpoints["size"])),
            {row["channel"]: (int(row["n"]), int(row["size"])) for row in blobs},
            (int(writes["n"]), int(writes["size"])),
        )

    async def adelete_thread(self, thread_id: str) -> None:
        """Delete a thread's checkpoints, blobs and writes."""
        await self._execute(sql.DELETE_THREAD, (str(thread_id),))

    async def adelete_checkpoints(self, thread_id: str, checkpoint_ids: Sequence[str]) -> None:
        """Delete these checkpoints of a thread and their writes (their blobs stay: another
        checkpoint may hold the same channel versions)."""
        await self._execute(sql.DELETE_CHECKPOINTS, (thread_id, list(checkpoint_ids)))

    # --- listing on the statement pool; pruning and delta history: the library's saver ------

    async def alist(
        self,
        config: Any,
        *,
        filter: dict[str, Any] | None = None,
        before: Any = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """Checkpoints matching the config, metadata filter and `before`, newest first."""
        matches: dict[str, Any] = {}
        if config:
            conf = config["configurable"]
            matches["thread_id"] = conf["thread_id"]
            if conf.get("checkpoint_ns") is not None:
                matches["checkpoint_ns"] = conf["checkpoint_ns"]
            if checkpoint_id := get_checkpoint_id(config):
                matches["checkpoint_id"] = checkpoint_id
        if filter:
            matches["metadata"] = to_json(filter)
        if before is not None:
            matches["before"] = get_checkpoint_id(before)
        rows = await self._fetch(*sql.list_query(matches, limit))
        if any(older_format(row) for row in rows):
            # The library migrates the pending sends of checkpoints in the older format.
            library = await self.library.saver(self.serde)
            with client_data_errors():
                async for item in library.alist(config, filter=filter, before=before, limit=limit):
                    yield item
            return
        for row in rows:
            yield self._tuple(row)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """Prune the threads' checkpoints (the library's saver)."""
        library = await self.library.saver(self.serde)
        await self._cold(library.aprune(thread_ids, strategy=strategy))

    async def aget_delta_channel_history(
        self, *, config: Any, channels: Sequence[str]
    ) -> Mapping[str, Any]:
        """Writes and seed of delta channels along the parent chain (the library's saver)."""
        library = await self.library.saver(self.serde)
        return await self._cold(
            library.aget_delta_channel_history(config=config, channels=channels)
        )

    # --- from other threads, as the library's async saver allows ------------------------------

    def get_tuple(self, config: Any) -> CheckpointTuple | None:
        """`aget_tuple` from a thread other than the event loop's."""
        return self._blocking(self.aget_tuple(config))

    def list(
        self,
        config: Any,
        *,
        filter: dict[str, Any] | None = None,
        before: Any = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """`alist` from a thread other than the event loop's."""
        found = self.alist(config, filter=filter, before=before, limit=limit)
        while True:
            try:
                yield self._blocking(anext(found))  # type: ignore[arg-type]
            except StopAsyncIteration:
                return

    def put(
        self,
        config: Any,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> Any:
        """`aput` from a thread other than the event loop's."""
        return self._blocking(self.aput(config, checkpoint, metadata, new_versions))

    def put_writes(
        self, config: Any, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = ""
    ) -> None:
        """`aput_writes` from a thread other than the event loop's."""
        self._blocking(self.aput_writes(config, writes, task_id, task_path))

    def delete_thread(self, thread_id: str) -> None:
        """`adelete_thread` from a thread other than the event loop's."""
        self._blocking(self.adelete_thread(thread_id))

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """`aprune` from a thread other than the event loop's."""
        self._blocking(self.aprune(thread_ids, strategy=strategy))

    def get_delta_channel_history(
        self, *, config: Any, channels: Sequence[str]
    ) -> Mapping[str, Any]:
        """`aget_delta_channel_history` from a thread other than the event loop's."""
        return self._blocking(self.aget_delta_channel_history(config=config, channels=channels))

    def get_next_version(self, current: str | None, channel: None) -> str:
        """The library's version format: a zero-padded counter, then a random fraction."""
        return next_version(current)

    # --- plumbing ---------------------------------------------------------------------------

    def _tuple(self, row: Any) -> CheckpointTuple:
        """A checkpoint row of `SELECT` (runyard/db/checkpoints.py) as LangGraph's tuple."""
        with naming_checkpoint(row["thread_id"], row["checkpoint_ns"], row["checkpoint_id"]):
            return checkpoint_tuple(row, self.serde.loads_typed, self.metadata_read)

    async def close(self) -> None:
        """Close what the library's saver opened, if it was ever needed."""
        await self.library.close()

    async def _execute(self, sql: str, args: Sequence[Any]) -> None:
        if self.on_statements is not None:
            self.on_statements(1)
        await self.statements.execute(sql, args)

    async def _fetch(self, sql: str, args: Sequence[Any]) -> Sequence[Any]:
        if self.on_statements is not None:
            self.on_statements(1)
        return await self.statements.fetch_sql(sql, args)

    async def _fenced(self, query: str, params: tuple[Any, ...]) -> None:
        """A fenced write of sql: its parameters, then the fence's; refused when not held."""
        assert self.fence is not None
        rows = await self._fetch(query, (*params, *self.fence))
        if not rows or not rows[0]["held"]:
            self._refuse()

    async def _fenced_writes(self, rows: Sequence[tuple[Any, ...]], special: bool) -> None:
        query = sql.FENCED_REPLACE_WRITES if special else sql.FENCED_KEEP_WRITES
        await self._fenced(query, fenced_write_params(rows, special))

    async def _ensure_held(self) -> None:
        """For writes the library's saver makes: checked just before (it cannot be inside)."""
        if self.fence is not None:
            rows = await self._fetch(sql.STILL_HOLDS, self.fence)
            if not rows[0]["held"]:
                self._refuse()

    def _refuse(self) -> None:
        assert self.fence is not None
        run_id, attempt = self.fence
        raise StaleAttemptError(
            f"attempt {attempt} of run {run_id} is no longer current; checkpoint write refused"
        )

    async def _cold(self, call: Coroutine[Any, Any, Any]) -> Any:
        with client_data_errors():
            return await call

    def _blocking(self, call: Coroutine[Any, Any, Any]) -> Any:
        return from_thread(
            call,
            self.loop,
            "synchronous calls to the PostgreSQL checkpointer are only allowed from another "
            "thread; on the event loop use its async methods (aget_tuple, alist…) or "
            "`await graph.ainvoke(...)`",
        )
