"""Graph configuration: langgraph.json / runyard.json parsing and graph loading."""

from __future__ import annotations

import json
import logging
import os
import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langgraph.pregel import Pregel

from runyard.domain.errors import ConfigError, NotFoundError
from runyard.graphs.registry import GraphRegistry, LoadedGraph, default_assistant_id
from runyard.project.config import ProjectConfig, apply_environment, find_config, load_config

# A tiny graph file: `builder` is an uncompiled StateGraph, `graph` its compiled form.
GRAPH_SOURCE = textwrap.dedent(
    """
    from typing import TypedDict

    from langgraph.graph import END, START, StateGraph


    class State(TypedDict, total=False):
        text: str


    def shout(state: State) -> State:
        return {"text": state.get("text", "").upper() + "!"}


    builder = StateGraph(State)
    builder.add_node("shout", shout)
    builder.add_edge(START, "shout")
    builder.add_edge("shout", END)
    graph = builder.compile()
    named = builder.compile(name="ReAct Agent")


    def make_with_config(config):
        suffix = config["configurable"]["suffix"]

        def tag(state: State) -> State:
            return {"text": state.get("text", "") + suffix}

        b = StateGraph(State)
        b.add_node("tag", tag)
        b.add_edge(START, "tag")
        b.add_edge("tag", END)
        return b.compile()


    def make_without_config():
        return builder


    async def make_async(config):
        return builder.compile()


    def make_nothing():
        return 42


    not_a_graph = 42
    """
)


@pytest.fixture(autouse=True)
def restore_sys_path(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Graph loading prepends folders to sys.path; undo that after each test."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    yield


@pytest.fixture
def env_name(monkeypatch: pytest.MonkeyPatch) -> str:
    """A variable name unique to the test, removed from os.environ afterwards."""
    name = f"RUNYARD_TEST_{uuid.uuid4().hex[:8].upper()}"
    # setenv then delenv records "absent" as the state to restore, whatever the code sets.
    monkeypatch.setenv(name, "placeholder")
    monkeypatch.delenv(name)
    return name


def write_project(folder: Path, config: dict[str, Any], name: str = "langgraph.json") -> Path:
    """Write graph.py and a config file into folder; return the config path."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "graph.py").write_text(GRAPH_SOURCE)
    path = folder / name
    path.write_text(json.dumps(config))
    return path


def load_one(tmp_path: Path, spec: str) -> LoadedGraph:
    """Load a single graph declared as `spec` in a fresh project under tmp_path."""
    project = tmp_path / "project"
    config = load_config(write_project(project, {"graphs": {"g": spec}}))
    return GraphRegistry.load(config).get("g")


# --- finding and parsing the configuration file ------------------------------------------


def test_langgraph_json_is_found_and_parsed(tmp_path: Path) -> None:
    write_project(tmp_path, {"graphs": {"agent": "./graph.py:graph"}, "dependencies": ["."]})
    path = find_config(None, cwd=tmp_path)
    assert path == (tmp_path / "langgraph.json").resolve()
    config = load_config(path)
    assert config.path == path
    assert list(config.graphs) == ["agent"]
    spec = config.graphs["agent"]
    assert spec.graph_id == "agent"
    assert spec.file == (tmp_path / "graph.py").resolve()
    assert spec.attribute == "graph"
    assert config.dependencies == ["."]
    assert config.env == {}


def test_runyard_json_is_preferred_over_langgraph_json(tmp_path: Path) -> None:
    write_project(tmp_path, {"graphs": {"from_langgraph": "./graph.py:graph"}})
    write_project(tmp_path, {"graphs": {"from_runyard": "./graph.py:graph"}}, "runyard.json")
    path = find_config(None, cwd=tmp_path)
    assert path.name == "runyard.json"
    assert list(load_config(path).graphs) == ["from_runyard"]


def test_explicit_config_wins_over_the_working_directory(tmp_path: Path) -> None:
    write_project(tmp_path, {"graphs": {"a": "./graph.py:graph"}}, "runyard.json")
    other = write_project(tmp_path / "other", {"graphs": {"b": "./graph.py:graph"}})
    assert find_config(other, cwd=tmp_path) == other.resolve()


def test_missing_config_says_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        find_config(None, cwd=tmp_path)
    assert "runyard.json" in caught.value.message
    assert "langgraph.json" in caught.value.message
    assert "--config" in caught.value.message
    with pytest.raises(ConfigError, match="does not exist"):
        find_config(tmp_path / "nope.json")


def test_paths_resolve_against_the_config_folder_not_the_cwd(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_project(tmp_path / "proj", {"graphs": {"g": "graph.py:graph"}})
    monkeypatch.chdir(tmp_path)
    assert load_config(path).graphs["g"].file == (tmp_path / "proj" / "graph.py").resolve()


def test_graph_entry_may_be_an_object_with_a_description(tmp_path: Path) -> None:
    entry = {"path": "./graph.py:graph", "description": "Shouts back"}
    config = load_config(write_project(tmp_path, {"graphs": {"g": entry}}))
    assert config.graphs["g"].description == "Shouts back"
    assert config.graphs["g"].attribute == "graph"


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("{not json", "cannot read"),
        ("[]", "top level"),
        (json.dumps({"graphs": {}}), "'graphs'"),
        (json.dumps({"dependencies": ["."]}), "'graphs'"),
        (json.dumps({"graphs": {"g": "./graph.py"}}), "'g'"),
        (json.dumps({"graphs": {"g": "./graph.py:graph"}, "encryption": {"pth": "x"}}), "pth"),
        (json.dumps({"graphs": {"g": "./graph.py:graph"}, "ui": {"x": "./ui.tsx"}}), "ui.x"),
        (json.dumps({"graphs": {"g": "./graph.py:graph"}, "ui": ["./ui.tsx"]}), "'ui'"),
        (json.dumps({"graphs": {"g": "./graph.py:graph"}, "ui": {"x": "../ui.tsx"}}), "ui.x"),
        (
            json.dumps({"graphs": {"g": "./graph.py:graph"}, "ui_config": {"shared": "react"}}),
            "ui_config.shared",
        ),
        (
            json.dumps({"graphs": {"g": "./graph.py:graph"}, "ui_config": {"share": []}}),
            "ui_config.share",
        ),
        (
            json.dumps({"graphs": {"g": "./graph.py:graph"}, "priority": {"pth": "x"}}),
            "priority.pth",
        ),
        (json.dumps({"graphs": {"g": "./graph.py:graph"}, "priority": []}), "'priority'"),
        (
            json.dumps(
                {
                    "graphs": {"g": "./graph.py:graph"},
                    "webhooks": {"url": {"allowed_domains": ["a*.b"]}},
                }
            ),
            "webhooks.url.allowed_domains",
        ),
        (json.dumps({"graphs": {"g": "./graph.py:graph"}, "webhooks": {"urls": {}}}), "'webhooks'"),
        (json.dumps({"graphs": {"g": "./graph.py:graph"}, "grahps": {}}), "'grahps'"),
        (json.dumps({"graphs": {"g": "./graph.py:graph"}, "http": {"cros": {}}}), "http.cros"),
        (
            json.dumps({"graphs": {"g": "./graph.py:graph"}, "http": {"mount_prefix": "api/"}}),
            "mount_prefix",
        ),
        (
            json.dumps({"graphs": {"g": "./graph.py:graph"}, "checkpointer": {"path": "x"}}),
            "checkpointer.path",
        ),
        (json.dumps({"graphs": {"g": "./graph.py:graph"}, "auth": {"pth": "x"}}), "auth.pth"),
        (json.dumps({"graphs": {"g": "./graph.py:graph"}, "dependencies": "."}), "dependencies"),
        (json.dumps({"graphs": {"g": "./graph.py:graph"}, "env": 3}), "'env'"),
        (json.dumps({"graphs": {"g": "./graph.py:graph"}, "store": []}), "'store'"),
    ],
)
def test_invalid_config_names_the_file_and_the_problem(
    tmp_path: Path, content: str, expected: str
) -> None:
    path = tmp_path / "langgraph.json"
    path.write_text(content)
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert str(path) in caught.value.message
    assert expected in caught.value.message


def test_optional_sections_are_kept(tmp_path: Path) -> None:
    raw = {
        "graphs": {"g": "./graph.py:graph"},
        "store": {"index": {"dims": 4}},
        "auth": {"path": "./auth.py:auth"},
        "http": {"cors": {"allow_origins": ["*"]}},
    }
    config = load_config(write_project(tmp_path, raw))
    assert config.store == {"index": {"dims": 4}}
    assert config.auth == {"path": "./auth.py:auth"}
    assert config.http == {"cors": {"allow_origins": ["*"]}}


def test_http_switches_turn_off_mcp_and_a2a(tmp_path: Path) -> None:
    plain = load_config(write_project(tmp_path, {"graphs": {"g": "./graph.py:graph"}}))
    assert plain.http_config.enabled("mcp") and plain.http_config.enabled("a2a")
    raw = {"graphs": {"g": "./graph.py:graph"}, "http": {"disable_mcp": True}}
    config = load_config(write_project(tmp_path, raw)).http_config
    assert (config.enabled("mcp"), config.enabled("a2a")) == (False, True)


# --- env and dependencies -----------------------------------------------------------------


def test_env_as_a_mapping_is_exported(tmp_path: Path, env_name: str) -> None:
    raw = {"graphs": {"g": "./graph.py:graph"}, "env": {env_name: "from-mapping", "N": 3}}
    config = load_config(write_project(tmp_path, raw))
    assert config.env == {env_name: "from-mapping", "N": "3"}
    apply_environment(ProjectConfig(path=config.path, graphs=config.graphs, env={env_name: "v"}))
    assert os.environ[env_name] == "v"


def test_env_as_a_file_is_read_relative_to_the_config(tmp_path: Path, env_name: str) -> None:
    (tmp_path / "settings.env").write_text(f"{env_name}=from-file\n# a comment\n")
    raw = {"graphs": {"g": "./graph.py:graph"}, "env": "./settings.env"}
    config = load_config(write_project(tmp_path, raw))
    assert config.env == {env_name: "from-file"}
    apply_environment(config)
    assert os.environ[env_name] == "from-file"


def test_missing_env_file_is_a_warning_naming_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # The official templates declare `"env": ".env"` and ship only `.env.example`;
    # `langgraph dev` (langgraph-api 0.16.7, run side by side) starts on such a folder.
    raw = {"graphs": {"g": "./graph.py:graph"}, "env": "./missing.env"}
    with caplog.at_level(logging.WARNING, logger="runyard.config"):
        config = load_config(write_project(tmp_path, raw))
    assert config.env == {}
    [record] = [r for r in caplog.records if r.name == "runyard.config"]
    assert record.getMessage().startswith("env_file_missing ")
    assert f"path={(tmp_path / 'missing.env').resolve()}" in record.getMessage()


def test_env_from_the_config_never_overrides_the_environment(
    tmp_path: Path, env_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(env_name, "from-shell")
    raw = {"graphs": {"g": "./graph.py:graph"}, "env": {env_name: "from-config"}}
    apply_environment(load_config(write_project(tmp_path, raw)))
    assert os.environ[env_name] == "from-shell"


def test_dependencies_are_added_to_sys_path(tmp_path: Path) -> None:
    lib = tmp_path / "libs" / "shared"
    lib.mkdir(parents=True)
    module = f"helper_{uuid.uuid4().hex[:8]}"
    (lib / f"{module}.py").write_text("VALUE = 'imported'\n")
    project = tmp_path / "project"
    raw = {"graphs": {"g": "./graph.py:graph"}, "dependencies": [".", "../libs/shared"]}
    config = load_config(write_project(project, raw))
    apply_environment(config)
    assert str(lib.resolve()) in sys.path
    assert str(project.resolve()) in sys.path

    # A graph file can import from a dependency folder once the environment is applied.
    (project / "uses_dep.py").write_text(GRAPH_SOURCE + f"\nfrom {module} import VALUE\n")
    raw = {"graphs": {"g": "./uses_dep.py:graph"}, "dependencies": ["../libs/shared"]}
    config = load_config(write_project(project, raw))
    apply_environment(config)
    assert GraphRegistry.load(config).has("g")


# --- loading graphs -----------------------------------------------------------------------


async def test_compiled_graph_is_used_as_is(tmp_path: Path) -> None:
    loaded = load_one(tmp_path, "./graph.py:graph")
    assert isinstance(loaded.graph, Pregel)
    graph = await loaded.build()
    assert await graph.ainvoke({"text": "hi"}) == {"text": "HI!"}


async def test_state_graph_is_compiled_automatically(tmp_path: Path) -> None:
    loaded = load_one(tmp_path, "./graph.py:builder")
    assert isinstance(loaded.graph, Pregel)
    assert loaded.factory is None
    graph = await loaded.build()
    assert await graph.ainvoke({"text": "hey"}) == {"text": "HEY!"}


async def test_factory_receives_the_config(tmp_path: Path) -> None:
    loaded = load_one(tmp_path, "./graph.py:make_with_config")
    assert loaded.graph is None
    graph = await loaded.build({"configurable": {"suffix": "-tagged"}})
    assert await graph.ainvoke({"text": "a"}) == {"text": "a-tagged"}
    other = await loaded.build({"configurable": {"suffix": "-other"}})
    assert await other.ainvoke({"text": "a"}) == {"text": "a-other"}


async def test_factory_without_config_argument_returning_a_state_graph(tmp_path: Path) -> None:
    loaded = load_one(tmp_path, "./graph.py:make_without_config")
    graph = await loaded.build({"configurable": {"ignored": True}})
    assert isinstance(graph, Pregel)
    assert await graph.ainvoke({"text": "x"}) == {"text": "X!"}


async def test_async_factory_is_awaited(tmp_path: Path) -> None:
    graph = await load_one(tmp_path, "./graph.py:make_async").build()
    assert await graph.ainvoke({"text": "y"}) == {"text": "Y!"}


async def test_factory_returning_something_else_is_a_config_error(tmp_path: Path) -> None:
    loaded = load_one(tmp_path, "./graph.py:make_nothing")
    with pytest.raises(ConfigError) as caught:
        await loaded.build()
    assert "make_nothing" in caught.value.message
    assert "int" in caught.value.message


def test_attribute_of_the_wrong_type_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        load_one(tmp_path, "./graph.py:not_a_graph")
    assert "not_a_graph" in caught.value.message
    assert "int" in caught.value.message


def test_missing_attribute_names_file_and_attribute(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        load_one(tmp_path, "./graph.py:nowhere")
    message = caught.value.message
    assert str((tmp_path / "project" / "graph.py").resolve()) in message
    assert "'nowhere'" in message
    assert "'g'" in message


def test_missing_graph_file_names_it(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        load_one(tmp_path, "./absent.py:graph")
    assert str((tmp_path / "project" / "absent.py").resolve()) in caught.value.message


@pytest.mark.parametrize(
    ("source", "cause"),
    [
        ("raise RuntimeError('database password missing')\n", "database password missing"),
        ("def broken(:\n", "SyntaxError"),
        ("import runyard_no_such_module_xyz\n", "runyard_no_such_module_xyz"),
    ],
)
def test_broken_graph_file_names_file_attribute_and_cause(
    tmp_path: Path, source: str, cause: str
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "broken.py").write_text(source)
    spec = {"graphs": {"bad": "./broken.py:my_agent"}}
    (project / "langgraph.json").write_text(json.dumps(spec))
    config = load_config(project / "langgraph.json")
    with pytest.raises(ConfigError) as caught:
        GraphRegistry.load(config)
    message = caught.value.message
    assert str((project / "broken.py").resolve()) in message
    assert "my_agent" in message
    assert cause in message
    assert "'bad'" in message


def test_broken_graph_does_not_leave_a_half_imported_module(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "broken.py").write_text("raise RuntimeError('boom')\n")
    (project / "langgraph.json").write_text(json.dumps({"graphs": {"bad": "./broken.py:graph"}}))
    before = set(sys.modules)
    with pytest.raises(ConfigError):
        GraphRegistry.load(load_config(project / "langgraph.json"))
    assert not {name for name in set(sys.modules) - before if "broken" in name}


def test_registry_keeps_config_order_and_names_known_graphs(tmp_path: Path) -> None:
    graphs = {"zeta": "./graph.py:graph", "alpha": "./graph.py:builder"}
    registry = GraphRegistry.load(load_config(write_project(tmp_path, {"graphs": graphs})))
    assert registry.ids() == ["zeta", "alpha"]
    assert registry.has("alpha")
    assert not registry.has("missing")
    with pytest.raises(NotFoundError) as caught:
        registry.get("missing")
    assert "'missing'" in caught.value.message
    assert "alpha, zeta" in caught.value.message


def test_two_graph_files_with_the_same_name_do_not_collide(tmp_path: Path) -> None:
    first = tmp_path / "one"
    second = tmp_path / "two"
    write_project(first, {"graphs": {"g": "./graph.py:graph"}})
    write_project(second, {"graphs": {"g": "./graph.py:graph"}})
    (second / "graph.py").write_text(GRAPH_SOURCE.replace('.upper() + "!"', '+ "?"'))
    a = GraphRegistry.load(load_config(first / "langgraph.json")).get("g")
    b = GraphRegistry.load(load_config(second / "langgraph.json")).get("g")
    assert a.graph is not None and b.graph is not None
    assert a.graph.invoke({"text": "q"}) == {"text": "Q!"}
    assert b.graph.invoke({"text": "q"}) == {"text": "q?"}


# --- default assistants -------------------------------------------------------------------


def test_default_assistant_id_matches_langgraph_platform() -> None:
    namespace = uuid.UUID("6ba7b821-9dad-11d1-80b4-00c04fd430c8")
    for graph_id in ("agent", "pipeline", "approval", "my graph/ü"):
        assert default_assistant_id(graph_id) == str(uuid.uuid5(namespace, graph_id))
    # The value LangGraph Platform gives the graph named "agent".
    assert default_assistant_id("agent") == "fe096781-5601-53d2-b2f6-0d3403f7e9ca"


@pytest.mark.parametrize(
    ("spec", "name"),
    [
        ("./graph.py:named", "ReAct Agent"),
        ("./graph.py:graph", "g"),
        ("./graph.py:builder", "g"),
        ("./graph.py:make_with_config", "g"),
    ],
    ids=["named", "compiled-unnamed", "state-graph", "factory"],
)
def test_default_assistant_name_is_the_graph_name_else_the_graph_id(
    tmp_path: Path, spec: str, name: str
) -> None:
    # As langgraph_api.graph.register_graph (0.16.7) names it: a Pregel's own name unless it
    # is LangGraph's default "LangGraph"; the graph id for the rest. Checked side by side with
    # `langgraph dev`: compile(name="ReAct Agent") -> "ReAct Agent", compile() -> graph id.
    assert load_one(tmp_path, spec).assistant_name == name


def test_default_assistant_id_is_stable_and_distinct() -> None:
    assert default_assistant_id("agent") == default_assistant_id("agent")
    assert default_assistant_id("agent") != default_assistant_id("pipeline")
    assert uuid.UUID(default_assistant_id("pipeline")).version == 5


def test_ui_and_ui_config_are_read_as_langgraph_reads_them(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "ui.tsx").write_text("export default {};\n")
    raw = {
        "graphs": {"agent": "./graph.py:graph"},
        "ui": {"agent": "./src/ui.tsx"},
        "ui_config": {"shared": ["@acme/design"]},
    }
    config = load_config(write_project(tmp_path, raw))
    assert config.ui == {"agent": "./src/ui.tsx"}
    assert config.ui_shared == ["@acme/design"]
    assert config.project_dir == tmp_path


# --- keys of langgraph_cli's schema (langgraph-cli 0.4.40, langgraph_cli/schemas.py) ------


def config_error(tmp_path: Path, extra: dict[str, Any]) -> str:
    """The message load_config gives a config of one graph plus `extra`."""
    path = tmp_path / "langgraph.json"
    path.write_text(json.dumps({"graphs": {"g": "./graph.py:graph"}, **extra}))
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    return caught.value.message


@pytest.mark.parametrize(
    ("store", "key"),
    [
        ({"index": {"embed": "openai:x", "dims": 4, "field": ["$"]}}, "store.index.field"),
        ({"ttl": {"default_ttl": 5, "refresh_on_reed": True}}, "store.ttl.refresh_on_reed"),
        ({"indexes": {}}, "store.indexes"),
    ],
)
def test_unknown_store_sub_keys_are_refused_naming_them(
    tmp_path: Path, store: dict[str, Any], key: str
) -> None:
    """langgraph-cli 0.4.40's StoreConfig: index {dims, embed, fields}, ttl {refresh_on_read,
    default_ttl, sweep_interval_minutes}; any other key is a typo Runyard must not drop."""
    message = config_error(tmp_path, {"store": store})
    assert key in message
    assert "supported" in message


@pytest.mark.parametrize("key", ["disable_persistence"])
def test_keys_of_langgraph_cli_are_not_called_unknown(tmp_path: Path, key: str) -> None:
    """langgraph-cli 0.4.40 reads `disable_persistence` (langgraph_cli/cli.py, config.py):
    refusing it, Runyard says what it does and why it does not serve it (`ui_config`, the
    other such key, is served: see the generative UI tests above)."""
    message = config_error(tmp_path, {key: True})
    assert f"'{key}'" in message
    assert "not part of LangGraph's config" not in message
    assert "remove it" in message


def test_disable_persistence_false_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "langgraph.json"
    path.write_text(json.dumps({"graphs": {"g": "./graph.py:graph"}, "disable_persistence": False}))
    assert load_config(path).graphs


@pytest.mark.parametrize(
    ("extra", "key", "why"),
    [
        ({"checkpointer": {"path": "./saver.py:saver"}}, "checkpointer.path", "fenced"),
        (
            {"checkpointer": {"serde": {"pickle_fallback": True}}},
            "checkpointer.serde",
            "serializer",
        ),
        ({"store": {"path": "./store.py:store"}}, "store.path", "/store routes"),
    ],
)
def test_a_custom_checkpointer_or_store_is_refused_saying_why(
    tmp_path: Path, extra: dict[str, Any], key: str, why: str
) -> None:
    message = config_error(tmp_path, extra)
    assert key in message
    assert why in message
    assert len(message.splitlines()) == 1
