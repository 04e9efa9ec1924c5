"""The project templates `runyard new` writes, bundled so it needs no network.

`new-langgraph-project-python` has the shape of LangGraph's template of that name: a package
under `src/`, one graph with a context schema, a langgraph.json that reads `.env`; its node
needs no model or API key, so the project serves as soon as it is written.
"""

from __future__ import annotations

DEFAULT_TEMPLATE = "new-langgraph-project-python"

_LANGGRAPH_JSON = """\
{
  "dependencies": ["."],
  "graphs": {
    "agent": "./src/agent/graph.py:graph"
  },
  "env": ".env"
}
"""

_PYPROJECT = """\
[project]
name = "agent"
version = "0.0.1"
description = "A LangGraph graph, served with Runyard"
requires-python = ">=3.11"
dependencies = ["langgraph>=1.0", "python-dotenv>=1.0"]

[build-system]
requires = ["setuptools>=73", "wheel"]
build-backend = "setuptools.build_meta"

[tool.setuptools]
package-dir = {"" = "src"}
packages = ["agent"]
"""

_ENV_EXAMPLE = """\
# Copy to .env: the server reads it (\"env\" in langgraph.json) and the graph sees it.
# OPENAI_API_KEY=...
# LANGSMITH_API_KEY=...
"""

_GRAPH = '''\
"""The project's graph: one node that answers from the state and the run's context.

Replace `respond` with your own nodes (a model call, tools); `Context` is what a run may
pass as `context`, `State` what the graph keeps between steps.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypedDict

from langgraph.graph import StateGraph
from langgraph.runtime import Runtime


class Context(TypedDict, total=False):
    """What a run can set in `context`."""

    greeting: str


@dataclass
class State:
    """What the graph keeps: the text it was given, and its answer."""

    text: str = "world"
    answer: str = ""


async def respond(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
    """Answer with the greeting of the run's context (`Hello` by default)."""
    greeting = (runtime.context or {}).get("greeting", "Hello")
    return {"answer": f"{greeting}, {state.text}!"}


graph = (
    StateGraph(State, context_schema=Context)
    .add_node(respond)
    .add_edge("__start__", "respond")
    .compile(name="New Graph")
)
'''

_README = """\
# agent

A LangGraph project, served with Runyard.

    python -m venv .venv && . .venv/bin/activate
    pip install -e ~/src/runyard  # Runyard, from its clone (or the wheel you were given)
    pip install -e .              # this project and its dependencies, in the same environment
    cp .env.example .env
    runyard dev                   # http://127.0.0.1:2024

Try it: `curl -s localhost:2024/runs/wait -H 'content-type: application/json'
-d '{"assistant_id": "agent", "input": {"text": "you"}}'`.
The graph is `src/agent/graph.py`; `runyard validate` checks langgraph.json and its paths.
"""

TEMPLATES: dict[str, dict[str, str]] = {
    DEFAULT_TEMPLATE: {
        "langgraph.json": _LANGGRAPH_JSON,
        "pyproject.toml": _PYPROJECT,
        ".env.example": _ENV_EXAMPLE,
        "README.md": _README,
        "src/agent/__init__.py": '"""The agent package: its graph is `agent.graph.graph`."""\n',
        "src/agent/graph.py": _GRAPH,
    }
}
