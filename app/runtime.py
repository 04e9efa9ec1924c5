"""Builds and owns every part of a Runyard instance; doubles as the app lifespan."""

from __future__ import annotations

import logging
import os
import socket
import uuid
from contextlib import AsyncExitStack
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from sqlalchemy.ext.asyncio import AsyncEngine, async_sessionmaker

from app.db.engine import create_engine, migrate, session_factory
from app.graphs.checkpointer import open_checkpointer
from app.graphs.config import ProjectConfig, apply_environment, find_config, load_config
from app.graphs.registry import GraphRegistry
from app.settings import Settings

log = logging.getLogger("runyard.runtime")


class Runtime:
    """The one root of an instance: parts are started in order and stopped in reverse."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.instance_id = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._stack = AsyncExitStack()
        self._started = False
        self.project: ProjectConfig
        self.graphs: GraphRegistry
        self.engine: AsyncEngine
        self.sessions: async_sessionmaker[Any]
        self.checkpointer: BaseCheckpointSaver

    @property
    def dialect(self) -> str:
        """`postgresql` or `sqlite`."""
        return self.engine.dialect.name

    async def start(self) -> None:
        """Load graphs, connect storage, migrate, then start the background parts."""
        settings = self.settings
        self.project = load_config(find_config(settings.config_path))
        apply_environment(self.project)
        self.graphs = GraphRegistry.load(self.project)
        url = settings.resolved_database_url()
        self.engine = create_engine(url)
        self._stack.push_async_callback(self.engine.dispose)
        self.sessions = session_factory(self.engine)
        if settings.migrate_on_start or settings.is_embedded:
            await migrate(self.engine)
        self.checkpointer = await self._stack.enter_async_context(
            open_checkpointer(url, settings.data_dir)
        )
        from app.services.assistants import ensure_default_assistants

        await ensure_default_assistants(self)
        self._started = True
        log.info(
            "runtime_started instance=%s database=%s graphs=%s",
            self.instance_id,
            self.dialect,
            ",".join(self.graphs.ids()),
        )

    async def stop(self) -> None:
        """Stop every part in reverse order of start (idempotent)."""
        await self._stack.aclose()
        self._started = False
