"""Graphs declared the other ways LangGraph accepts: module paths and factories that take a
ServerRuntime or Runtime, or are context managers set up per use."""

from __future__ import annotations

import json
import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from runyard.domain.errors import ConfigError
from runyard.graphs.factories import GraphAccess
from runyard.graphs.registry import GraphRegistry
from runyard.project.config import apply_environment, load_config
from runyard.project.http_config import parse_http

FACTORIES = textwrap.dedent(
    """
    from contextlib import asynccontextmanager
    from typing import TypedDict

    from langgraph.graph import END, START, StateGraph
    from langgraph.runtime import Runtime
    from langgraph_sdk.runtime import ServerRuntime

    EVENTS = []


    class State(TypedDict, total=False):
        text: str


    def _graph(text):
        b = StateGraph(State)
        b.add_node("say", lambda state: {"text": text})
        b.add_edge(START, "say")
        b.add_edge("say", END)
        return b.compile()


    def with_server_runtime(runtime: ServerRuntime):
        user = runtime.user.identity if runtime.user else "nobody"
        return _graph(f"{runtime.access_context}:{user}")


    def with_runtime(runtime: Runtime):
        return _graph(f"store={runtime.store is not None}")


    def with_both(config, rt: ServerRuntime):
        return _graph(config["configurable"]["tag"] + ":" + rt.access_context)


    @asynccontextmanager
    async def managed(config):
        EVENTS.append("setup")
        try:
            yield _graph("managed")
        finally:
            EVENTS.append("teardown")


    def too_many(a, b, c):
        return _graph("x")
    """
)


@pytest.fixture(autouse=True)
def restore_sys_path(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Graph loading prepends folders to sys.path; undo that after each test."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    yield


def project(tmp_path: Path, graphs: dict[str, object]) -> GraphRegistry:
    """A project whose package `pkg_<random>.factories` holds FACTORIES."""
    package = f"pkg_{uuid.uuid4().hex[:8]}"
    (tmp_path / package).mkdir()
    (tmp_path / package / "__init__.py").write_text("")
    (tmp_path / package / "factories.py").write_text(FACTORIES)
    (tmp_path / "factories.py").write_text(FACTORIES)
    raw = {
        "dependencies": ["."],
        "graphs": {
            gid: json.loads(json.dumps(spec).replace("PKG", package))
            for gid, spec in graphs.items()
        },
    }
    (tmp_path / "langgraph.json").write_text(json.dumps(raw))
    config = load_config(tmp_path / "langgraph.json")
    apply_environment(config)
    return GraphRegistry.load(config)


async def test_a_module_path_is_imported_from_the_dependencies(tmp_path: Path) -> None:
    registry = project(tmp_path, {"g": "PKG.factories:with_runtime"})
    spec = registry.get("g").spec
    assert spec.module is not None and spec.module.endswith(".factories")
    assert spec.file is None
    graph = await registry.get("g").build()
    assert await graph.ainvoke({}) == {"text": "store=False"}


def test_a_missing_module_names_it(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        project(tmp_path, {"g": "no_such_pkg.graph:graph"})
    assert "no_such_pkg.graph" in caught.value.message
    assert "dependencies" in caught.value.message


async def test_a_server_runtime_factory_learns_why_and_for_whom(tmp_path: Path) -> None:
    loaded = project(tmp_path, {"g": "./factories.py:with_server_runtime"}).get("g")
    access = GraphAccess(access_context="threads.create_run", user=_User("ann"))
    async with loaded.open({}, access) as graph:
        assert await graph.ainvoke({}) == {"text": "threads.create_run:ann"}
    graph = await loaded.build({}, "threads.read")
    assert await graph.ainvoke({}) == {"text": "threads.read:nobody"}


async def test_a_runtime_factory_gets_the_store(tmp_path: Path) -> None:
    from langgraph.store.memory import InMemoryStore

    loaded = project(tmp_path, {"g": "./factories.py:with_runtime"}).get("g")
    graph = await loaded.build({}, "assistants.read", InMemoryStore())
    assert await graph.ainvoke({}) == {"text": "store=True"}


async def test_a_factory_may_take_config_and_runtime_in_any_order(tmp_path: Path) -> None:
    loaded = project(tmp_path, {"g": "./factories.py:with_both"}).get("g")
    graph = await loaded.build({"configurable": {"tag": "t"}}, "threads.read")
    assert await graph.ainvoke({}) == {"text": "t:threads.read"}


async def test_a_context_manager_factory_is_torn_down_after_each_use(tmp_path: Path) -> None:
    loaded = project(tmp_path, {"g": "./factories.py:managed"}).get("g")
    events = sys.modules[loaded.factory.__module__].EVENTS  # type: ignore[union-attr]
    access = GraphAccess(access_context="threads.create_run")
    async with loaded.open({}, access) as graph:
        assert events == ["setup"]
        assert await graph.ainvoke({}) == {"text": "managed"}
    assert events == ["setup", "teardown"]


def test_a_factory_with_three_parameters_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="too_many"):
        project(tmp_path, {"g": "./factories.py:too_many"})


def test_the_object_form_keeps_its_description(tmp_path: Path) -> None:
    entry = {"path": "PKG.factories:with_runtime", "description": "Says where the store is"}
    registry = project(tmp_path, {"g": entry})
    assert registry.get("g").spec.description == "Says where the store is"


def test_configurable_headers_follow_langgraph_patterns() -> None:
    http = parse_http(
        "cfg",
        {"configurable_headers": {"includes": ["x-*", "user-agent"], "excludes": ["x-secret-*"]}},
    )
    chosen = http.headers.select(
        [
            ("X-Tenant", "t1"),
            ("x-secret-token", "no"),
            ("User-Agent", "ua"),
            ("accept", "no"),
            ("authorization", "Bearer no"),
            ("x-api-key", "no"),
            ("langsmith-trace", "trace"),
        ]
    )
    assert chosen == {"x-tenant": "t1", "user-agent": "ua", "langsmith-trace": "trace"}
    # Without patterns nothing but the tracing header reaches the run, as on LangGraph.
    assert parse_http("cfg", {}).headers.select([("x-a", "1"), ("langsmith-trace", "t")]) == {
        "langsmith-trace": "t"
    }


class _User:
    def __init__(self, identity: str) -> None:
        self.identity = identity
