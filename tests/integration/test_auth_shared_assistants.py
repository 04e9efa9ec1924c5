"""LangGraph's documented auth pattern end to end: owners stamped, system assistants shared.

Reference: LangGraph's resource-authorization docs return
`{"$or": [{"owner": user}, {"created_by": "system"}]}` from `@auth.on.assistants.read` so every
user can run the per-graph assistants; `langgraph dev` (langgraph-api 0.16.7, run side by side
with tests/graphs/auth_shared.py) lets both users run `agent` by graph id and hides each user's
threads from the other. There a field operator it does not know (`$in`) is skipped without a
word (`crons.search()` answered `[]`); Runyard answers 500 naming the handler instead, since a
filter that is silently skipped or matches nothing is a leak or an outage nobody can see.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from langgraph_sdk import get_client

from tests.support.backends import backend_server
from tests.support.runs import status_error
from tests.support.server import ROOT, ServerProcess

CONFIG = ROOT / "tests" / "graphs" / "langgraph_auth_shared.json"
HELLO = {"messages": [{"role": "user", "content": "hello"}]}
Sdk = Any


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def shared_server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    """A server whose auth handlers follow LangGraph's documented pattern."""
    workdir = tmp_path_factory.mktemp(f"auth-shared-{request.param}")
    with backend_server(request.param, workdir, config=CONFIG) as proc:
        yield proc


@pytest.fixture
async def users(shared_server: ServerProcess) -> AsyncIterator[tuple[Sdk, Sdk]]:
    """langgraph-sdk clients for user-a and user-b."""
    clients = [
        get_client(url=shared_server.url, api_key=None, headers={"Authorization": f"Bearer {u}"})
        for u in ("user-a", "user-b")
    ]
    try:
        yield clients[0], clients[1]
    finally:
        for client in clients:
            await client.http.client.aclose()


async def test_every_user_runs_the_system_assistants_by_graph_id(
    users: tuple[Sdk, Sdk],
) -> None:
    for client in users:
        visible = await client.assistants.search(graph_id="agent")
        assert [a["assistant_id"] for a in visible if a["metadata"].get("created_by") == "system"]
        assert (await client.assistants.get("agent"))["graph_id"] == "agent"
        thread = await client.threads.create()
        out = await client.runs.wait(thread["thread_id"], "agent", input=HELLO)
        assert out["messages"][-1]["type"] == "ai", out


async def test_own_assistants_are_stamped_and_hidden_from_others(
    users: tuple[Sdk, Sdk],
) -> None:
    a, b = users
    tag = uuid.uuid4().hex
    mine = await a.assistants.create("pipeline", metadata={"tag": tag})
    assert mine["metadata"]["owner"] == "user-a"
    assert [x["assistant_id"] for x in await a.assistants.search(metadata={"tag": tag})] == [
        mine["assistant_id"]
    ]
    assert await b.assistants.search(metadata={"tag": tag}) == []
    assert (await status_error(b.assistants.get(mine["assistant_id"])))[0] == 404
    thread = await b.threads.create()
    run = b.runs.wait(thread["thread_id"], mine["assistant_id"], input={"text": "x"})
    assert (await status_error(run))[0] == 404


async def test_each_user_sees_only_their_own_threads(users: tuple[Sdk, Sdk]) -> None:
    a, b = users
    tag = uuid.uuid4().hex
    threads = {}
    for name, client in (("user-a", a), ("user-b", b)):
        thread = await client.threads.create(metadata={"tag": tag})
        assert thread["metadata"]["owner"] == name
        threads[name] = thread["thread_id"]
    for name, client in (("user-a", a), ("user-b", b)):
        found = await client.threads.search(metadata={"tag": tag})
        assert [t["thread_id"] for t in found] == [threads[name]]
    assert (await status_error(b.threads.get(threads["user-a"])))[0] == 404
    assert (await status_error(b.runs.wait(threads["user-a"], "agent", input=HELLO)))[0] == 404


async def test_a_filter_with_an_unknown_operator_fails_loudly(
    users: tuple[Sdk, Sdk], shared_server: ServerProcess
) -> None:
    a, _ = users
    status, detail = await status_error(a.crons.search())
    assert status == 500
    assert "'$in'" in detail and "crons_with_a_typo" in detail, detail
    log = shared_server.log_path.read_text()
    assert "auth_filter_invalid handler=crons_with_a_typo" in log
    assert "operator=$in" in log
