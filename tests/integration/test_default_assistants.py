"""Default assistants take the compiled graph's name, in new stores and in existing ones."""

from __future__ import annotations

from pathlib import Path
from typing import TypedDict

import pytest
from langgraph.graph import StateGraph
from sqlalchemy import select

from runyard.db.engine import session_factory
from runyard.db.tables import assistant_versions, assistants
from runyard.graphs.registry import GraphRegistry, LoadedGraph, default_assistant_id
from runyard.project.config import GraphSpec
from runyard.services.assistants import ensure_default_assistants
from tests.support.databases import migrated_engine


class State(TypedDict, total=False):
    text: str


def registry(names: dict[str, str | None]) -> GraphRegistry:
    """Graphs by id, each compiled with the given name (None: no name)."""
    graphs = {}
    for graph_id, name in names.items():
        builder = StateGraph(State).add_node("n", lambda s: s).add_edge("__start__", "n")
        compiled = builder.compile(name=name) if name else builder.compile()
        spec = GraphSpec(graph_id, Path(f"/{graph_id}.py"), "graph")
        graphs[graph_id] = LoadedGraph(spec, compiled, None)
    return GraphRegistry(graphs)


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
async def test_default_assistants_are_named_after_their_graph(tmp_path: Path, kind: str) -> None:
    async with migrated_engine(kind, tmp_path) as engine:
        sessions = session_factory(engine)
        # A store written when default assistants were named after the graph id, where the
        # user renamed one of them in a later version.
        await ensure_default_assistants(sessions, registry({"agent": None, "mine": None}))
        mine = default_assistant_id("mine")
        async with sessions() as session, session.begin():
            await session.execute(
                assistants.update()
                .where(assistants.c.assistant_id == mine)
                .values(name="My own name", version=2)
            )
            row = (
                (
                    await session.execute(
                        select(assistant_versions).where(assistant_versions.c.assistant_id == mine)
                    )
                )
                .mappings()
                .one()
            )
            await session.execute(
                assistant_versions.insert().values({**row, "version": 2, "name": "My own name"})
            )

        new = registry({"agent": "ReAct Agent", "mine": "Memory Agent", "plain": None})
        await ensure_default_assistants(sessions, new)
        async with sessions() as session:
            names = dict(
                (await session.execute(select(assistants.c.graph_id, assistants.c.name))).all()
            )
            versions = (
                await session.execute(
                    select(
                        assistant_versions.c.graph_id,
                        assistant_versions.c.version,
                        assistant_versions.c.name,
                    )
                )
            ).all()
    assert names == {"agent": "ReAct Agent", "mine": "My own name", "plain": "plain"}
    assert sorted(versions) == [
        ("agent", 1, "ReAct Agent"),
        ("mine", 1, "Memory Agent"),
        ("mine", 2, "My own name"),
        ("plain", 1, "plain"),
    ]
