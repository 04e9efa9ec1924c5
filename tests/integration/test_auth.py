"""Authentication and per-user isolation with a LangGraph `Auth` object (tests/graphs/auth.py)."""

from __future__ import annotations

import uuid

import httpx

from tests.support.auth import Sdk, sdk_for
from tests.support.runs import new_tag, status_error
from tests.support.server import ServerProcess


async def finished_run(client: Sdk, tag: dict[str, str]) -> tuple[str, str, str]:
    """An owned assistant, thread and finished run of the chat graph: their ids."""
    assistant = await client.assistants.create("agent", metadata=tag)
    thread = await client.threads.create(metadata=tag)
    run = await client.runs.create(
        thread["thread_id"],
        assistant["assistant_id"],
        input={"messages": [{"role": "user", "content": "hello"}]},
    )
    await client.runs.join(thread["thread_id"], run["run_id"])
    return assistant["assistant_id"], thread["thread_id"], run["run_id"]


async def test_requests_without_a_valid_token_get_401(auth_server: ServerProcess) -> None:
    async with httpx.AsyncClient(base_url=auth_server.url) as http:
        for headers in ({}, {"Authorization": "Bearer nobody"}, {"Authorization": "Basic x"}):
            response = await http.post("/threads/search", json={}, headers=headers)
            assert response.status_code == 401, response.text
            assert response.json()["detail"] == "unknown or missing token"
        assert (await http.get("/assistants/agent")).status_code == 401
        assert (await http.get("/store/items", params={"key": "k"})).status_code == 401
        # Probes and docs stay open for load balancers and humans.
        for path in ("/ok", "/info", "/livez", "/openapi.json"):
            assert (await http.get(path)).status_code == 200, path


async def test_a_forbidden_action_gets_403(auth_server: ServerProcess) -> None:
    reader = sdk_for(auth_server, "reader")
    try:
        status, _ = await status_error(reader.threads.create(metadata=new_tag()))
        assert status == 403
    finally:
        await reader.http.client.aclose()


async def test_threads_are_stamped_and_invisible_to_others(users: tuple[Sdk, Sdk]) -> None:
    a, b = users
    tag = new_tag()
    thread = await a.threads.create(metadata=tag)
    thread_id = thread["thread_id"]
    assert thread["metadata"]["owner"] == "user-a"
    assert (await a.threads.get(thread_id))["thread_id"] == thread_id
    for call in (
        b.threads.get(thread_id),
        b.threads.update(thread_id, metadata={"owner": "user-b"}),
        b.threads.get_state(thread_id),
        b.threads.get_history(thread_id),
        b.threads.copy(thread_id),
        b.threads.delete(thread_id),
    ):
        assert (await status_error(call))[0] == 404
    assert await b.threads.search(metadata=tag) == []
    assert await b.threads.count(metadata=tag) == 0
    # Asking for someone else's owner explicitly still finds nothing.
    assert await b.threads.search(metadata={**tag, "owner": "user-a"}) == []
    assert [t["thread_id"] for t in await a.threads.search(metadata=tag)] == [thread_id]
    assert await a.threads.count(metadata=tag) == 1
    # Creating with a known id answers the owner's thread only to the owner.
    status, _ = await status_error(b.threads.create(thread_id=thread_id, if_exists="do_nothing"))
    assert status == 404
    assert (await a.threads.get(thread_id))["metadata"]["owner"] == "user-a"


async def test_runs_are_invisible_to_others(
    users: tuple[Sdk, Sdk], auth_server: ServerProcess
) -> None:
    a, b = users
    tag = new_tag()
    assistant_id, thread_id, run_id = await finished_run(a, tag)
    assert len(await a.runs.list(thread_id)) == 1
    assert (await a.runs.get(thread_id, run_id))["run_id"] == run_id
    for call in (
        b.runs.list(thread_id),
        b.runs.get(thread_id, run_id),
        b.runs.join(thread_id, run_id),
        b.runs.cancel(thread_id, run_id),
        b.runs.delete(thread_id, run_id),
        b.runs.create(thread_id, assistant_id, input={"messages": []}),
        b.runs.wait(thread_id, assistant_id, input={"messages": []}),
        b.runs.cancel_many(thread_id=thread_id, run_ids=[run_id]),
    ):
        assert (await status_error(call))[0] == 404
    async with httpx.AsyncClient(base_url=auth_server.url) as http:
        b_headers = {"Authorization": "Bearer user-b"}
        stream = await http.get(f"/threads/{thread_id}/runs/{run_id}/stream", headers=b_headers)
        assert stream.status_code == 404
        new_stream = await http.post(
            f"/threads/{thread_id}/runs/stream",
            json={"assistant_id": assistant_id, "input": {"messages": []}},
            headers=b_headers,
        )
        assert new_stream.status_code == 404
        # Cancelling by status would reach every user's runs.
        everything = await http.post("/runs/cancel", json={"status": "pending"}, headers=b_headers)
        assert everything.status_code == 403
    # user-b cannot run user-a's assistant on a thread of their own either.
    own = await b.threads.create(metadata=tag)
    status, _ = await status_error(
        b.runs.create(own["thread_id"], assistant_id, input={"messages": []})
    )
    assert status == 404
    # The owner still sees everything intact.
    assert (await a.runs.get(thread_id, run_id))["status"] == "success"


async def test_assistants_are_invisible_to_others(users: tuple[Sdk, Sdk]) -> None:
    a, b = users
    tag = new_tag()
    assistant = await a.assistants.create("agent", metadata=tag)
    assistant_id = assistant["assistant_id"]
    assert assistant["metadata"]["owner"] == "user-a"
    for call in (
        b.assistants.get(assistant_id),
        b.assistants.get_graph(assistant_id),
        b.assistants.get_schemas(assistant_id),
        b.assistants.get_versions(assistant_id),
        b.assistants.update(assistant_id, metadata={"x": 1}),
        b.assistants.delete(assistant_id),
    ):
        assert (await status_error(call))[0] == 404
    assert await b.assistants.search(metadata=tag) == []
    assert await b.assistants.count(metadata=tag) == 0
    assert [x["assistant_id"] for x in await a.assistants.search(metadata=tag)] == [assistant_id]
    assert await a.assistants.count(metadata=tag) == 1


async def test_crons_are_invisible_to_others(users: tuple[Sdk, Sdk]) -> None:
    a, b = users
    tag = new_tag()
    assistant = await a.assistants.create("agent", metadata=tag)
    thread = await a.threads.create(metadata=tag)
    cron = await a.crons.create_for_thread(
        thread["thread_id"], assistant["assistant_id"], schedule="0 0 1 1 *", metadata=tag
    )
    assert cron["metadata"]["owner"] == "user-a"
    assert await b.crons.search(metadata=tag) == []
    assert await b.crons.count(metadata=tag) == 0
    assert (await status_error(b.crons.delete(cron["cron_id"])))[0] == 404
    status, _ = await status_error(
        b.crons.create_for_thread(
            thread["thread_id"], assistant["assistant_id"], schedule="0 0 1 1 *"
        )
    )
    assert status == 404
    assert [c["cron_id"] for c in await a.crons.search(metadata=tag)] == [cron["cron_id"]]
    await a.crons.delete(cron["cron_id"])


async def test_store_items_live_in_each_users_namespace(users: tuple[Sdk, Sdk]) -> None:
    a, b = users
    label = new_tag()["test_tag"]
    await a.store.put_item(["notes", label], "k", {"secret": "a"})
    assert (await a.store.get_item(["notes", label], "k"))["value"] == {"secret": "a"}
    assert await b.store.get_item(["notes", label], "k") is None
    assert await b.store.get_item(["user-a", "notes", label], "k") is None
    assert (await b.store.search_items(["notes", label]))["items"] == []
    await b.store.delete_item(["notes", label], "k")
    found = (await a.store.search_items(["notes", label]))["items"]
    assert [item["key"] for item in found] == ["k"]
    namespaces = (await b.store.list_namespaces(prefix=["notes"]))["namespaces"]
    assert all(ns[0] == "user-b" for ns in namespaces)


async def test_a_thread_created_by_a_run_belongs_to_its_creator(users: tuple[Sdk, Sdk]) -> None:
    a, b = users
    tag = new_tag()
    assistant = await a.assistants.create("agent", metadata=tag)
    thread_id = str(uuid.uuid4())
    run = await a.runs.create(
        thread_id,
        assistant["assistant_id"],
        input={"messages": [{"role": "user", "content": "hello"}]},
        if_not_exists="create",
    )
    await a.runs.join(thread_id, run["run_id"])
    assert (await a.threads.get(thread_id))["metadata"]["owner"] == "user-a"
    assert (await status_error(b.threads.get(thread_id)))[0] == 404
    assert (await status_error(b.runs.get(thread_id, run["run_id"])))[0] == 404
