"""Thread use cases: create (with supersteps), read, patch, delete, search, count, copy."""

from __future__ import annotations

import logging
import re
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.base.id import uuid6

from runyard.checkpoints.checkpointer import StorageReporting, copy_thread_checkpoints
from runyard.db import threads as threads_db
from runyard.db.engine import Sessions
from runyard.domain.errors import ConflictError, InvalidInputError, NotFoundError
from runyard.domain.new_run import NewThread
from runyard.domain.retention import ThreadTTLPolicy
from runyard.domain.status import ThreadStatus
from runyard.domain.thread import ThreadRecord
from runyard.encryption.encrypted_json import opened_thread, sealed
from runyard.graphs.registry import GraphRegistry
from runyard.lifecycle.machine import RunLifecycle
from runyard.schemas.threads import (
    ThreadCreate,
    ThreadFilter,
    ThreadPatch,
    ThreadSearch,
    ThreadTTL,
)
from runyard.services.encrypted_filters import refuse_encrypted_keys
from runyard.services.thread_state import ThreadStateService, thread_not_found
from runyard.streaming.thread_log import state_log

if TYPE_CHECKING:
    from runyard.encryption.at_rest import AtRest
    from runyard.encryption.custom import CustomEncryption

log = logging.getLogger("runyard.threads")

WIRE_FIELDS = (
    "thread_id",
    "created_at",
    "updated_at",
    "state_updated_at",
    "metadata",
    "status",
    "config",
    "values",
    "interrupts",
    "error",
)
EXTRACTABLE_ROOTS = frozenset({"values", "metadata", "config", "interrupts"})
_ALIAS = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_PATH_SPLIT = re.compile(r"\.|\[")


def new_thread_id() -> str:
    """A time-ordered UUID, as LangGraph Platform issues for threads."""
    return str(uuid6())


def to_wire(thread: ThreadRecord, *, include_ttl: bool = False) -> dict[str, Any]:
    """The Agent Protocol view of a thread (its JSON as given: `opened_thread` first), its
    timestamps as ISO 8601 strings; with `include_ttl`, its time-to-live when it has one."""
    wire: dict[str, Any] = {
        "thread_id": thread.thread_id,
        "created_at": thread.created_at.isoformat(),
        "updated_at": thread.updated_at.isoformat(),
        "state_updated_at": (thread.state_updated_at or thread.updated_at).isoformat(),
        "metadata": thread.metadata or {},
        "status": thread.status.value,
        "config": thread.config or {},
        "values": thread.values,
        "interrupts": thread.interrupts or {},
        "error": thread.error,
    }
    if include_ttl and (ttl := ttl_wire(thread)) is not None:
        wire["ttl"] = ttl
    return wire


def ttl_wire(thread: ThreadRecord) -> dict[str, Any] | None:
    """A thread's `ttl` as LangGraph Platform shapes it, or None when it has none."""
    if thread.ttl_minutes is None:
        return None
    expires_at = thread.expires_at
    return {
        "strategy": thread.ttl_strategy or "delete",
        "ttl_minutes": thread.ttl_minutes,
        "expires_at": expires_at.isoformat() if expires_at is not None else None,
    }


def ttl_columns(ttl: ThreadTTL | float | None, policy: ThreadTTLPolicy) -> dict[str, Any]:
    """The thread columns a TTL sets: the one given, else the configured default (if any)."""
    if isinstance(ttl, int | float):
        ttl = ThreadTTL(ttl=float(ttl), strategy=policy.strategy)
    if ttl is None:
        if policy.default_ttl_minutes is None:
            return {}
        ttl = ThreadTTL(ttl=policy.default_ttl_minutes, strategy=policy.strategy)
    expires_at = datetime.now(UTC) + timedelta(minutes=ttl.ttl)
    return {"ttl_strategy": ttl.strategy, "ttl_minutes": ttl.ttl, "expires_at": expires_at}


def extract_path(data: dict[str, Any], path: str) -> Any:
    """The value at a path such as `values.messages[-1].content`; None when it does not resolve."""
    parts = _PATH_SPLIT.split(path)
    current: Any = data.get(parts[0])
    for part in parts[1:]:
        if current is None:
            return None
        if part.endswith("]"):
            try:
                index = int(part[:-1])
                current = current[index] if isinstance(current, list) else None
            except (ValueError, IndexError):
                return None
        elif part:
            current = current.get(part) if isinstance(current, dict) else None
    return current


def _validated_extract(extract: dict[str, str] | None) -> dict[str, str] | None:
    if not extract:
        return None
    for alias, path in extract.items():
        if not _ALIAS.match(alias) or alias in WIRE_FIELDS:
            raise InvalidInputError(
                f"extract alias {alias!r} must be an identifier (letters, digits, _) and not "
                "a thread field name"
            )
        root = path.split(".")[0].split("[")[0]
        if root not in EXTRACTABLE_ROOTS:
            raise InvalidInputError(
                f"extract path {path!r} must start with one of: "
                + ", ".join(sorted(EXTRACTABLE_ROOTS))
            )
    return extract


def _query(
    body: ThreadFilter, ids: list[str] | None, auth_filter: dict[str, Any] | None
) -> threads_db.ThreadQuery:
    return threads_db.ThreadQuery(
        ids=ids,
        metadata=body.metadata,
        values=body.values,
        status=body.status,
        auth_filter=auth_filter,
    )


class ThreadService:
    """Thread use cases, on the thread rows and their checkpoints."""

    def __init__(
        self,
        sessions: Sessions,
        autocommit: Sessions,
        lifecycle: RunLifecycle,
        checkpointer: BaseCheckpointSaver,
        graphs: GraphRegistry,
        thread_ttl: ThreadTTLPolicy,
        at_rest: AtRest | None,
        encryption: CustomEncryption | None,
        state: ThreadStateService,
    ) -> None:
        self.sessions = sessions
        self.autocommit = autocommit
        self.lifecycle = lifecycle
        self.checkpointer = checkpointer
        self.graphs = graphs
        self.thread_ttl = thread_ttl
        self.at_rest = at_rest
        self.encryption = encryption
        self.state = state

    async def create_thread(self, body: ThreadCreate) -> ThreadRecord:
        """Create a thread (and apply its supersteps), or return the existing one when asked to."""
        thread_id = str(body.thread_id) if body.thread_id else new_thread_id()
        metadata = dict(body.metadata or {})
        if body.graph_id:
            metadata["graph_id"] = body.graph_id
        graph_id = metadata.get("graph_id")
        if body.supersteps:
            self._require_graph(graph_id)
        thread = NewThread(
            thread_id,
            metadata=await sealed(self, "thread", "metadata", metadata),
            columns=ttl_columns(body.ttl, self.thread_ttl),
        )
        async with self.sessions() as session, session.begin():
            created = await self.lifecycle.create_thread(session, thread)
            if created is None:
                if body.if_exists == "raise":
                    raise ConflictError(
                        f"thread {thread_id} already exists; pass if_exists='do_nothing' to get it "
                        "back instead"
                    )
                existing = await threads_db.get_thread(session, thread_id)
                if existing is None:  # deleted between the two statements
                    raise thread_not_found(thread_id)
                return await opened_thread(self, existing)
            if body.supersteps:
                try:
                    await self.state.apply_supersteps(
                        session, thread_id, str(graph_id), body.supersteps
                    )
                except BaseException:
                    # The row is rolled back with the transaction; the checkpoints are not.
                    await self.checkpointer.adelete_thread(thread_id)
                    raise
                created = await threads_db.get_thread(session, thread_id)
                assert created is not None
        log.info("thread_created thread_id=%s graph_id=%s", thread_id, graph_id)
        return await opened_thread(self, created)

    async def get_thread(self, thread_id: str) -> ThreadRecord:
        """The thread, its JSON decrypted, or NotFoundError."""
        async with self.autocommit() as session:
            thread = await threads_db.get_thread(session, thread_id)
        if thread is None:
            raise thread_not_found(thread_id)
        return await opened_thread(self, thread)

    async def thread_storage(self, thread_id: str) -> dict[str, Any]:
        """What the thread's checkpoints occupy, as LangGraph's server reports it, or 404."""
        await self.get_thread(thread_id)
        saver = self.checkpointer
        if not isinstance(saver, StorageReporting):  # both of Runyard's savers report it
            raise InvalidInputError("this checkpointer does not report its storage")
        return {"thread_id": thread_id, **await saver.athread_storage(thread_id)}

    async def patch_thread(self, thread_id: str, body: ThreadPatch) -> ThreadRecord:
        """Merge the given metadata into the thread's (top-level keys replaced)."""
        async with self.sessions() as session, session.begin():
            # The touch locks the row first, so a concurrent merge is never lost.
            if not await threads_db.touch_thread(session, thread_id):
                raise thread_not_found(thread_id)
            current = await threads_db.get_thread(session, thread_id)
            assert current is not None
            current = await opened_thread(self, current)
            merged = {**(current.metadata or {}), **body.metadata}
            merged = await sealed(self, "thread", "metadata", merged)
            await threads_db.set_metadata(session, thread_id, merged)
            if body.ttl is not None:
                columns = ttl_columns(body.ttl, self.thread_ttl)
                await threads_db.set_ttl(
                    session,
                    thread_id,
                    columns["ttl_strategy"],
                    columns["ttl_minutes"],
                    columns["expires_at"],
                )
            patched = await threads_db.get_thread(session, thread_id)
            assert patched is not None
        return await opened_thread(self, patched)

    async def delete_thread(self, thread_id: str) -> None:
        """Delete the thread, its runs and its checkpoints."""
        active = await self.lifecycle.delete_thread(thread_id)
        if active is None:
            raise thread_not_found(thread_id)
        # Committed: Redis failing now costs a log line, not the client's 2xx.
        await self.lifecycle.forget(state_log(thread_id))
        log.info("thread_deleted thread_id=%s stopped_runs=%s", thread_id, len(active))

    async def delete_threads_of_assistant(self, assistant_id: str) -> int:
        """Delete every thread whose metadata names the assistant; returns how many went."""
        query = threads_db.ThreadQuery(metadata={"assistant_id": assistant_id})
        deleted = 0
        while True:
            async with self.autocommit() as session:
                page = await threads_db.search_threads(
                    session, query, sort_by="thread_id", descending=False, limit=500, offset=0
                )
            gone = 0
            for thread in page:
                try:
                    await self.delete_thread(thread.thread_id)
                except NotFoundError:
                    continue  # deleted meanwhile
                gone += 1
            deleted += gone
            if len(page) < 500 or gone == 0:
                return deleted

    async def search_threads(
        self, body: ThreadSearch, auth_filter: dict[str, Any] | None = None
    ) -> tuple[list[dict[str, Any]], int | None]:
        """One page of matching threads, and the offset of the next page (None on the last)."""
        refuse_encrypted_keys(self.at_rest, metadata=body.metadata, values=body.values)
        if self.encryption is not None:
            self.encryption.refuse_filter("metadata filter", body.metadata)
            self.encryption.refuse_filter("values filter", body.values)
        extract = _validated_extract(body.extract)
        ids = [str(thread_id) for thread_id in body.ids] if body.ids else None
        async with self.autocommit() as session:
            found = await threads_db.search_threads(
                session,
                _query(body, ids, auth_filter),
                sort_by=body.sort_by or "created_at",
                descending=body.sort_order != "asc",
                limit=body.limit + 1,
                offset=body.offset,
            )
        more = len(found) > body.limit
        page = []
        for thread in found[: body.limit]:
            plain = await opened_thread(self, thread)
            wire = to_wire(plain)
            selected: set[str] = set(body.select or ())
            if "context" in selected:
                # Not part of a thread's default shape, as on LangGraph Platform: only on request.
                wire["context"] = plain.context or {}
            out = {k: v for k, v in wire.items() if k in selected} if selected else wire
            if extract:
                out["extracted"] = {
                    alias: extract_path(wire, path) for alias, path in extract.items()
                }
            page.append(out)
        return page, (body.offset + body.limit if more else None)

    async def count_threads(
        self, body: ThreadFilter, auth_filter: dict[str, Any] | None = None
    ) -> int:
        """How many threads match the filters (and the caller's auth filter)."""
        refuse_encrypted_keys(self.at_rest, metadata=body.metadata, values=body.values)
        if self.encryption is not None:
            self.encryption.refuse_filter("metadata filter", body.metadata)
            self.encryption.refuse_filter("values filter", body.values)
        async with self.autocommit() as session:
            return await threads_db.count_threads(session, _query(body, None, auth_filter))

    async def copy_thread(self, thread_id: str) -> ThreadRecord:
        """A new thread with the same metadata, config and checkpoints (so the same state)."""
        new_id = new_thread_id()
        async with self.sessions() as session, session.begin():
            source = await threads_db.get_thread(session, thread_id)
            if source is None:
                raise thread_not_found(thread_id)
            failed = source.status is ThreadStatus.ERROR
            copied = NewThread(
                new_id,
                metadata=source.metadata or {},
                config=source.config or {},
                values=source.values,
                interrupts=source.interrupts or {},
                error=source.error,
                context=source.context,
            )
            # A copy has no runs, so it is never busy: idle, or error as its source.
            created = await self.lifecycle.create_thread(session, copied, failed=failed)
            assert created is not None
            # graph_id is never encrypted (runyard/encryption/custom.py never_encrypted).
            graph_id = (source.metadata or {}).get("graph_id")
            try:
                await copy_thread_checkpoints(self.checkpointer, thread_id, new_id)
                if graph_id:
                    config = (await opened_thread(self, source, ("config",))).config
                    graph = await self.state.bound_graph(graph_id, new_id, config)
                    await self.state.refresh_thread_from_checkpoint(
                        session,
                        new_id,
                        graph,
                        status=ThreadStatus.ERROR if failed else None,
                        error=source.error,
                    )
                    created = await threads_db.get_thread(session, new_id)
                    assert created is not None
            except BaseException:
                await self.checkpointer.adelete_thread(new_id)
                raise
        log.info("thread_copied thread_id=%s copy=%s", thread_id, new_id)
        # The copy keeps the source's ciphertexts and their stored context.
        return await opened_thread(self, created)

    def _require_graph(self, graph_id: Any) -> None:
        if not graph_id:
            raise InvalidInputError(
                "supersteps need a graph to apply them with: pass graph_id (or metadata.graph_id)"
            )
        if not self.graphs.has(str(graph_id)):
            known = ", ".join(self.graphs.ids()) or "none"
            raise InvalidInputError(f"graph {graph_id!r} not found; known graphs: {known}")
