"""A project shaped like LangGraph's official templates, served by a real `runyard dev`.

`tests/projects/template` copies the shape of `react-agent` (and of `new-langgraph-project`
and `memory-agent`): `"env": ".env"` with only `.env.example` shipped, a `context_schema`
dataclass whose fields have defaults, and a graph compiled with `name="ReAct Agent"`.
Reference: `langgraph dev` (langgraph-api 0.16.7) run side by side on the same shape starts
(its missing `.env` is skipped), names the default assistant "ReAct Agent", and runs a run
that sends no context, or `{}`, with the dataclass's defaults.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.support.server import ROOT, ServerProcess

TEMPLATE = ROOT / "tests" / "projects" / "template"
DEFAULTS = {
    "model": "anthropic/claude-sonnet-4-5-20250929",
    "user": "default-user",
    "prompt": "You are a helpful AI assistant.",
}


@pytest.fixture(scope="module")
def template_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """`runyard dev` on the template project, started once for the module."""
    assert not (TEMPLATE / ".env").exists(), "the template must ship no .env"
    server = ServerProcess(
        "dev", tmp_path_factory.mktemp("template"), config=TEMPLATE / "langgraph.json"
    )
    server.start()
    try:
        yield server
    finally:
        server.stop()


def answer(server: ServerProcess, **body: Any) -> dict[str, str]:
    """The fields of the graph's answer to one stateless run of `agent`."""
    payload = {"assistant_id": "agent", "input": {"messages": [{"role": "user", "content": "hi"}]}}
    response = httpx.post(f"{server.url}/runs/wait", json={**payload, **body}, timeout=30)
    assert response.status_code == 200, response.text
    text = response.json()["messages"][-1]["content"]
    fields = dict(part.split("=", 1) for part in text.split(" ", 2))
    return {"model": fields["model"], "user": fields["user"], "prompt": fields["prompt"]}


def test_a_missing_env_file_is_a_warning_not_a_refusal(template_server: ServerProcess) -> None:
    log = template_server.log_path.read_text()
    warnings = [line for line in log.splitlines() if "env_file_missing" in line]
    assert len(warnings) == 1, log[-3000:]
    assert "WARNING" in warnings[0]
    assert f"path={TEMPLATE / '.env'}" in warnings[0]
    assert "startup_failed" not in log


def test_the_default_assistant_has_the_compiled_graph_name(
    template_server: ServerProcess,
) -> None:
    found = httpx.post(f"{template_server.url}/assistants/search", json={}, timeout=10).json()
    assert [(a["graph_id"], a["name"]) for a in found] == [("agent", "ReAct Agent")]
    assert httpx.get(f"{template_server.url}/assistants/agent", timeout=10).json()["name"] == (
        "ReAct Agent"
    )


@pytest.mark.parametrize("body", [{}, {"context": {}}], ids=["no-context", "empty-context"])
def test_a_run_without_context_gets_the_schema_defaults(
    template_server: ServerProcess, body: dict[str, Any]
) -> None:
    assert answer(template_server, **body) == DEFAULTS


def test_a_run_with_context_uses_it_over_the_defaults(template_server: ServerProcess) -> None:
    got = answer(template_server, context={"model": "openai/gpt-4.1", "user_id": "ada"})
    assert got == {**DEFAULTS, "model": "openai/gpt-4.1", "user": "ada"}


def test_context_keys_the_schema_does_not_declare_are_dropped(
    template_server: ServerProcess,
) -> None:
    # As langgraph-api filters them (stream.py `_filter_context_by_schema`), instead of the
    # dataclass refusing an unexpected keyword.
    got = answer(template_server, context={"model": "openai/gpt-4.1", "temperature": 0})
    assert got == {**DEFAULTS, "model": "openai/gpt-4.1"}


def test_a_thread_run_gets_the_defaults_too(template_server: ServerProcess) -> None:
    url = template_server.url
    thread = httpx.post(f"{url}/threads", json={}, timeout=10).json()["thread_id"]
    payload = {"assistant_id": "agent", "input": {"messages": [{"role": "user", "content": "x"}]}}
    state = httpx.post(f"{url}/threads/{thread}/runs/wait", json=payload, timeout=30).json()
    assert state["messages"][-1]["content"].startswith(f"model={DEFAULTS['model']} ")
