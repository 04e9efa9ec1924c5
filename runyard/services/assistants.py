"""Assistant use cases: versioned configurations of a graph, and what their graph looks like."""

from __future__ import annotations

import logging
import uuid
from typing import TYPE_CHECKING, Any

from langgraph.pregel import Pregel
from langgraph.store.base import BaseStore
from sqlalchemy.ext.asyncio import AsyncConnection

from runyard.db import assistants as assistants_db
from runyard.db.assistants import AssistantPage
from runyard.db.dialect import database_now
from runyard.db.engine import Sessions
from runyard.domain.assistant import AssistantRecord, AssistantVersionRecord
from runyard.domain.encrypted_fields import ASSISTANT_FIELDS
from runyard.domain.errors import ConflictError, InvalidInputError, NotFoundError
from runyard.encryption.encrypted_json import opened, opened_assistant, sealed_fields
from runyard.graphs import introspection
from runyard.graphs.registry import GraphRegistry, default_assistant_id
from runyard.schemas.assistants import (
    AssistantConfig,
    AssistantCreate,
    AssistantFilter,
    AssistantPatch,
    AssistantSearch,
    AssistantVersionsSearch,
    columns_to_wire,
)
from runyard.services.encrypted_filters import refuse_encrypted_keys
from runyard.services.threads import ThreadService

if TYPE_CHECKING:
    from runyard.encryption.at_rest import AtRest
    from runyard.encryption.custom import CustomEncryption

log = logging.getLogger("runyard.assistants")

# The assistant JSON custom encryption covers (encryption.path).
ASSISTANT_JSON = ASSISTANT_FIELDS


def _page(body: AssistantSearch, auth_filter: dict[str, Any] | None) -> AssistantPage:
    return AssistantPage(
        graph_id=body.graph_id,
        name=body.name,
        metadata=body.metadata,
        auth_filter=auth_filter,
        limit=body.limit,
        offset=body.offset,
        sort_by=body.sort_by or "created_at",
        # Newest first unless told otherwise, as LangGraph Platform lists them.
        descending=body.sort_order != "asc",
    )


def _new_assistant_id(given: str | None) -> str:
    if not given:
        return str(uuid.uuid4())
    try:
        return str(uuid.UUID(given))
    except ValueError:
        raise InvalidInputError(
            f"assistant_id {given!r} is not a UUID; omit it to get a random one"
        ) from None


def _config_and_context(
    config_model: AssistantConfig | None, context: dict[str, Any] | None
) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """The given config, and the context it implies: `configurable` when context is absent."""
    config = config_model.model_dump(exclude_unset=True) if config_model is not None else None
    configurable = (config or {}).get("configurable")
    if configurable and context:
        raise InvalidInputError(
            "give either config.configurable or context, not both; context (LangGraph >= 0.6) "
            "replaces configurable"
        )
    if configurable:
        return config, dict(configurable)
    return config, context


def _with_context(config: dict[str, Any], context: dict[str, Any] | None) -> dict[str, Any]:
    # Context and `configurable` are two views of the same values since LangGraph 0.6; keep
    # them equal so graphs reading either one see the assistant's settings.
    if context is None:
        return config
    return {**config, "configurable": context}


async def ensure_default_assistants(sessions: Sessions, graphs: GraphRegistry) -> None:
    """Give every graph its default assistant (stable id derived from the graph id), named
    after the compiled graph."""
    async with sessions() as session, session.begin():
        now = await database_now(session)
        for graph_id in graphs.ids():
            loaded = graphs.get(graph_id)
            assistant_id = default_assistant_id(graph_id)
            await assistants_db.insert_assistant_if_missing(
                session,
                {
                    "assistant_id": assistant_id,
                    "graph_id": graph_id,
                    "name": loaded.assistant_name,
                    "description": loaded.spec.description,
                    "config": {},
                    "context": {},
                    "metadata": {"created_by": "system"},
                    "version": 1,
                    "created_at": now,
                    "updated_at": now,
                },
            )
            # Stores written before default assistants took the graph's name still call
            # them by the graph id.
            await assistants_db.rename_assistant(
                session, assistant_id, graph_id, loaded.assistant_name
            )


class AssistantService:
    """Assistant use cases: versioned configurations of the project's graphs."""

    def __init__(
        self,
        sessions: Sessions,
        autocommit: Sessions,
        graphs: GraphRegistry,
        store: BaseStore,
        at_rest: AtRest | None,
        encryption: CustomEncryption | None,
        threads: ThreadService,
    ) -> None:
        self.sessions = sessions
        self.autocommit = autocommit
        self.graphs = graphs
        self.store = store
        self.at_rest = at_rest
        self.encryption = encryption
        self.threads = threads

    def resolve_assistant_id(self, assistant_id: str) -> str:
        """The assistant id meant by `assistant_id`: a graph id names its default assistant."""
        if self.graphs.has(assistant_id):
            return default_assistant_id(assistant_id)
        try:
            return str(uuid.UUID(assistant_id))
        except ValueError:
            raise NotFoundError(self._not_found_message(assistant_id)) from None

    async def get_assistant(self, assistant_id: str) -> AssistantRecord:
        """The assistant for an assistant id or a graph id, or NotFoundError."""
        resolved = self.resolve_assistant_id(assistant_id)
        async with self.autocommit() as session:
            assistant = await assistants_db.get_assistant(session, resolved)
        if assistant is None:
            raise NotFoundError(self._not_found_message(assistant_id))
        return await opened_assistant(self, assistant)

    async def create_assistant(self, body: AssistantCreate) -> AssistantRecord:
        """Create an assistant at version 1, or return the existing one when asked to."""
        self._require_graph(body.graph_id)
        assistant_id = _new_assistant_id(body.assistant_id)
        config, context = _config_and_context(body.config, body.context)
        plain = {
            "graph_id": body.graph_id,
            "config": _with_context(config or {}, context),
            "context": context or {},
            "metadata": body.metadata or {},
            "name": body.name or "Untitled",
            "description": body.description,
        }
        fields = await sealed_fields(self, "assistant", plain, ASSISTANT_JSON)
        async with self.sessions() as session, session.begin():
            now = await database_now(session)
            row = {"assistant_id": assistant_id, **fields, "created_at": now}
            created = await assistants_db.insert_assistant(
                session, {**row, "version": 1, "updated_at": now}
            )
            if created is not None:
                await assistants_db.insert_version(session, {**row, "version": 1})
        if created is None:
            if body.if_exists == "do_nothing":
                return await self.get_assistant(assistant_id)
            raise ConflictError(
                f"assistant {assistant_id} already exists; pass if_exists='do_nothing' to get it "
                "back instead, or PATCH it to change it"
            )
        log.info("assistant_created assistant_id=%s graph_id=%s", assistant_id, body.graph_id)
        return await opened_assistant(self, created)

    async def patch_assistant(self, assistant_id: str, body: AssistantPatch) -> AssistantRecord:
        """Record a new version from the current one and the given fields, and make it current."""
        resolved = self.resolve_assistant_id(assistant_id)
        if body.graph_id is not None:
            self._require_graph(body.graph_id)
        config, context = _config_and_context(body.config, body.context)
        async with self.sessions() as session, session.begin():
            now = await database_now(session)
            if not await assistants_db.touch_assistant(session, resolved, now):
                raise NotFoundError(self._not_found_message(assistant_id))
            stored = await assistants_db.get_assistant(session, resolved)
            assert stored is not None
            current = await opened_assistant(self, stored)
            metadata = {**current.metadata, **(body.metadata or {})}
            plain = {
                "graph_id": body.graph_id or current.graph_id,
                "config": _with_context(config or current.config, context),
                "context": context if context is not None else current.context,
                "metadata": metadata,
                "name": body.name if body.name is not None else current.name,
                "description": body.description
                if body.description is not None
                else current.description,
            }
            fields = await sealed_fields(self, "assistant", plain, ASSISTANT_JSON)
            version = await assistants_db.next_version(session, resolved)
            await assistants_db.insert_version(
                session, {"assistant_id": resolved, "version": version, "created_at": now, **fields}
            )
            updated = await assistants_db.update_assistant(
                session, resolved, {**fields, "version": version, "updated_at": now}
            )
        log.info("assistant_patched assistant_id=%s version=%s", resolved, version)
        return await opened_assistant(self, updated)

    async def set_latest_version(self, assistant_id: str, version: int) -> AssistantRecord:
        """Make a stored version the assistant's current one (later versions are kept)."""
        resolved = self.resolve_assistant_id(assistant_id)
        async with self.sessions() as session, session.begin():
            now = await database_now(session)
            if not await assistants_db.touch_assistant(session, resolved, now):
                raise NotFoundError(self._not_found_message(assistant_id))
            stored = await assistants_db.get_version(session, resolved, version)
            if stored is None:
                raise NotFoundError(
                    f"version {version} of assistant {resolved} not found; list its versions "
                    "with POST /assistants/{assistant_id}/versions"
                )
            updated = await assistants_db.update_assistant(
                session, resolved, {**stored.current_columns(), "updated_at": now}
            )
        log.info("assistant_version_set assistant_id=%s version=%s", resolved, version)
        return await opened_assistant(self, updated)

    async def delete_assistant(self, assistant_id: str, *, delete_threads: bool = False) -> None:
        """Delete an assistant and its versions; a graph's default one returns at next start.

        With `delete_threads`, every thread whose metadata names the assistant goes too (its
        runs stopped, its checkpoints dropped), as LangGraph Platform does.
        """
        resolved = self.resolve_assistant_id(assistant_id)
        threads_deleted = 0
        if delete_threads:
            async with self.autocommit() as session:
                if await assistants_db.get_assistant(session, resolved) is None:
                    raise NotFoundError(self._not_found_message(assistant_id))
            threads_deleted = await self.threads.delete_threads_of_assistant(resolved)
        async with self.sessions() as session, session.begin():
            deleted = await assistants_db.delete_assistant(session, resolved)
        if not deleted:
            raise NotFoundError(self._not_found_message(assistant_id))
        log.info("assistant_deleted assistant_id=%s threads_deleted=%s", resolved, threads_deleted)

    async def search_assistants(
        self, body: AssistantSearch, auth_filter: dict[str, Any] | None = None
    ) -> tuple[list[AssistantRecord], int]:
        """One page of matching assistants, whole, and the total match count (`select_fields`
        answers a search that selects fields)."""
        self._check_search(body)
        async with self.autocommit() as session:
            found = await assistants_db.search_assistants(session, _page(body, auth_filter))
            total = await self._count(session, body, auth_filter)
        return [await opened_assistant(self, assistant) for assistant in found], total

    async def select_fields(
        self, body: AssistantSearch, auth_filter: dict[str, Any] | None = None
    ) -> tuple[list[dict[str, Any]], int]:
        """One page of matching assistants with only the fields `body.select` names, as the
        Agent Protocol's JSON, and the total match count."""
        self._check_search(body)
        columns = list(dict.fromkeys(body.select or ()))
        async with self.autocommit() as session:
            rows = await assistants_db.select_assistant_columns(
                session, _page(body, auth_filter), columns
            )
            total = await self._count(session, body, auth_filter)
        opened_rows = [await opened(self, "assistant", row, ASSISTANT_JSON) for row in rows]
        return [columns_to_wire(row) for row in opened_rows], total

    def _check_search(self, body: AssistantSearch) -> None:
        refuse_encrypted_keys(self.at_rest, metadata=body.metadata)
        if self.encryption is not None:
            self.encryption.refuse_filter("metadata filter", body.metadata)
        if body.graph_id:
            self._require_graph(body.graph_id)

    @staticmethod
    async def _count(
        session: AsyncConnection, body: AssistantFilter, auth_filter: dict[str, Any] | None
    ) -> int:
        return await assistants_db.count_assistants(
            session,
            graph_id=body.graph_id,
            name=body.name,
            metadata=body.metadata,
            auth_filter=auth_filter,
        )

    async def count_assistants(
        self, body: AssistantFilter, auth_filter: dict[str, Any] | None = None
    ) -> int:
        """How many assistants match the filters (and the caller's auth filter)."""
        if body.graph_id:
            self._require_graph(body.graph_id)
        async with self.autocommit() as session:
            return await self._count(session, body, auth_filter)

    async def list_versions(
        self, assistant_id: str, body: AssistantVersionsSearch
    ) -> list[AssistantVersionRecord]:
        """The assistant's versions, newest first, filtered on their metadata."""
        resolved = self.resolve_assistant_id(assistant_id)
        async with self.autocommit() as session:
            if await assistants_db.get_assistant(session, resolved) is None:
                raise NotFoundError(self._not_found_message(assistant_id))
            versions = await assistants_db.list_versions(
                session, resolved, metadata=body.metadata, limit=body.limit, offset=body.offset
            )
        return [await opened_assistant(self, version) for version in versions]

    async def get_schemas(self, assistant_id: str) -> dict[str, Any]:
        """The graph id and JSON schemas of the assistant's graph."""
        assistant, graph = await self._assistant_graph(assistant_id)
        return {"graph_id": assistant.graph_id, **introspection.graph_schemas(graph)}

    async def get_drawable_graph(self, assistant_id: str, xray: str | None) -> dict[str, Any]:
        """The nodes and edges of the assistant's graph, subgraphs expanded to `xray` depth."""
        depth = introspection.parse_xray(xray)
        _, graph = await self._assistant_graph(assistant_id)
        return await introspection.drawable_graph(graph, depth)

    async def get_subgraphs(
        self, assistant_id: str, namespace: str | None, recurse: bool
    ) -> dict[str, dict[str, Any]]:
        """The schemas of the assistant graph's subgraphs, keyed by namespace."""
        _, graph = await self._assistant_graph(assistant_id)
        return await introspection.subgraph_schemas(graph, namespace, recurse)

    async def _assistant_graph(self, assistant_id: str) -> tuple[AssistantRecord, Pregel]:
        assistant = await self.get_assistant(assistant_id)
        loaded = self.graphs.get(assistant.graph_id)
        config = {**assistant.config}
        config["configurable"] = {**config.get("configurable", {}), **assistant.context}
        return assistant, await loaded.build(config, "assistants.read", self.store)

    def _require_graph(self, graph_id: str) -> None:
        # Raises NotFoundError naming the known graphs.
        self.graphs.get(graph_id)

    def _not_found_message(self, assistant_id: str) -> str:
        known = ", ".join(self.graphs.ids()) or "none"
        return (
            f"assistant {assistant_id!r} not found; pass an assistant id (UUID) or a graph id "
            f"({known})"
        )
