"""Imports graph files and hands out graphs ready to run with a checkpointer."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from langgraph.graph import StateGraph
from langgraph.pregel import Pregel

from runyard.domain.errors import ConfigError, NotFoundError
from runyard.graphs.factories import (
    AccessContext,
    Arguments,
    GraphAccess,
    entered,
    factory_arguments,
)
from runyard.project.config import GraphSpec, ProjectConfig
from runyard.project.modules import import_attribute, import_module_attribute

# LangGraph Platform derives each graph's default assistant id as uuid5 of this namespace.
ASSISTANT_NAMESPACE = uuid.UUID("6ba7b821-9dad-11d1-80b4-00c04fd430c8")
# The name LangGraph gives a graph compiled without one (`compile(name=...)`).
UNNAMED_GRAPH = "LangGraph"


@lru_cache(maxsize=256)  # asked by every run that names its graph by id
def default_assistant_id(graph_id: str) -> str:
    """The stable id of a graph's default assistant, as LangGraph Platform computes it."""
    return str(uuid.uuid5(ASSISTANT_NAMESPACE, graph_id))


@dataclass
class LoadedGraph:
    """A graph as found in its file: a compiled graph, or a factory that builds one."""

    spec: GraphSpec
    graph: Pregel | None
    factory: Callable[..., Any] | None
    arguments: Arguments | None = None

    @property
    def assistant_name(self) -> str:
        """The default assistant's name: the compiled graph's own name, else the graph id.

        As LangGraph's server names it (langgraph_api.graph.register_graph): a factory, or a
        graph compiled without a name, is known by its graph id.
        """
        name = getattr(self.graph, "name", None)
        if isinstance(name, str) and name and name != UNNAMED_GRAPH:
            return name
        return self.spec.graph_id

    @asynccontextmanager
    async def open(
        self, config: dict[str, Any] | None, access: GraphAccess
    ) -> AsyncIterator[Pregel]:
        """The compiled graph for one use; a context-manager factory is torn down after it."""
        if self.graph is not None:
            yield self.graph
            return
        assert self.factory is not None and self.arguments is not None
        call = self.arguments(config or {}, access)
        async with entered(self.factory(**call)) as result:
            yield _as_compiled(self.spec, result)

    async def build(
        self,
        config: dict[str, Any] | None = None,
        access_context: AccessContext = "assistants.read",
        store: Any = None,
    ) -> Pregel:
        """The compiled graph to read its shape or state (a factory's resources are released
        at once: reads need the graph's topology, not what its nodes connect to)."""
        async with self.open(
            config, GraphAccess(access_context=access_context, store=store)
        ) as graph:
            return graph


class GraphRegistry:
    """Every graph of the project, imported once at start-up."""

    def __init__(self, graphs: dict[str, LoadedGraph]) -> None:
        self._graphs = graphs

    @classmethod
    def load(cls, config: ProjectConfig) -> GraphRegistry:
        """Import each graph file; a broken one fails with the file, attribute and cause."""
        return cls({gid: _load_one(spec) for gid, spec in config.graphs.items()})

    def ids(self) -> list[str]:
        """The graph ids, in configuration order."""
        return list(self._graphs)

    def has(self, graph_id: str) -> bool:
        """True when a graph with this id is registered."""
        return graph_id in self._graphs

    def get(self, graph_id: str) -> LoadedGraph:
        """The loaded graph, or NotFoundError naming the known ids."""
        try:
            return self._graphs[graph_id]
        except KeyError:
            known = ", ".join(sorted(self._graphs)) or "none"
            raise NotFoundError(f"graph {graph_id!r} not found; known graphs: {known}") from None


def _load_one(spec: GraphSpec) -> LoadedGraph:
    where = spec.location
    what = f"graph {spec.graph_id!r}"
    if spec.module is not None:
        target = import_module_attribute(spec.module, spec.attribute, what)
    else:
        assert spec.file is not None
        target = import_attribute(spec.file, spec.attribute, "runyard_graphs", what)
    if isinstance(target, (Pregel, StateGraph)):
        return LoadedGraph(spec, _as_compiled(spec, target), None)
    if callable(target):
        return LoadedGraph(spec, None, target, factory_arguments(target, f"{what} ({where})"))
    raise ConfigError(
        f"graph {spec.graph_id!r}: {where} is a {type(target).__name__}, expected a compiled "
        "graph, a StateGraph or a factory function"
    )


def _as_compiled(spec: GraphSpec, value: Any) -> Pregel:
    if isinstance(value, StateGraph):
        return value.compile()
    if isinstance(value, Pregel):
        return value
    raise ConfigError(
        f"graph {spec.graph_id!r}: factory {spec.location} returned "
        f"{type(value).__name__}, expected a compiled graph or a StateGraph"
    )
