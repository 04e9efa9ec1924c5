"""Imports graph files and hands out graphs ready to run with a checkpointer."""

from __future__ import annotations

import inspect
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from langgraph.graph import StateGraph
from langgraph.pregel import Pregel

from runyard.domain.errors import ConfigError, NotFoundError
from runyard.graphs.config import GraphSpec, ProjectConfig
from runyard.graphs.modules import import_attribute

# LangGraph Platform derives each graph's default assistant id as uuid5 of this namespace.
ASSISTANT_NAMESPACE = uuid.UUID("6ba7b821-9dad-11d1-80b4-00c04fd430c8")


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

    async def build(self, config: dict[str, Any] | None = None) -> Pregel:
        """The compiled graph for one use (calls the factory when there is one)."""
        if self.graph is not None:
            return self.graph
        assert self.factory is not None
        params = inspect.signature(self.factory).parameters
        result = self.factory(config or {}) if params else self.factory()
        if inspect.isawaitable(result):
            result = await result
        return _as_compiled(self.spec, result)


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
    where = f"{spec.file}:{spec.attribute}"
    target = import_attribute(
        spec.file, spec.attribute, "runyard_graphs", f"graph {spec.graph_id!r}"
    )
    if isinstance(target, (Pregel, StateGraph)):
        return LoadedGraph(spec, _as_compiled(spec, target), None)
    if callable(target):
        return LoadedGraph(spec, None, target)
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
        f"graph {spec.graph_id!r}: factory {spec.file}:{spec.attribute} returned "
        f"{type(value).__name__}, expected a compiled graph or a StateGraph"
    )
