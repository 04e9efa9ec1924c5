"""Assistant use cases."""

from __future__ import annotations

from typing import TYPE_CHECKING

from app.db import assistants as assistants_db
from app.graphs.registry import default_assistant_id

if TYPE_CHECKING:
    from app.runtime import Runtime


async def ensure_default_assistants(runtime: Runtime) -> None:
    """Give every graph its default assistant (stable id derived from the graph id)."""
    async with runtime.sessions() as session, session.begin():
        for graph_id in runtime.graphs.ids():
            await assistants_db.insert_assistant_if_missing(
                session,
                {
                    "assistant_id": default_assistant_id(graph_id),
                    "graph_id": graph_id,
                    "name": graph_id,
                    "description": None,
                    "config": {},
                    "context": {},
                    "metadata": {"created_by": "system"},
                    "version": 1,
                },
            )
