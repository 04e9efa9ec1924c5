"""Auth handlers rewrite the values they authorize, and Runyard stores what they wrote.

Compared with the library source of the official server (langgraph-api 0.16.7,
`langgraph_runtime_inmem.ops`): the create and update handlers of threads, assistants and
crons receive the request's metadata dict, and the object is stored with that dict as the
handler left it. LangGraph documents stamping `owner` in those handlers so that nobody can
hand an object to another user; the handlers of tests/graphs/auth.py do that.
"""

from __future__ import annotations

import pytest

from tests.support.auth import Sdk
from tests.support.runs import new_tag, status_error

pytestmark = pytest.mark.timeout(60)


async def test_a_thread_update_cannot_hand_the_thread_to_another_user(
    users: tuple[Sdk, Sdk],
) -> None:
    a, b = users
    tag = new_tag()
    thread = await b.threads.create(metadata=tag)
    thread_id = thread["thread_id"]
    updated = await b.threads.update(thread_id, metadata={"owner": "user-a", "note": "planted"})
    assert updated["metadata"]["owner"] == "user-b"
    assert updated["metadata"]["note"] == "planted"
    assert (await b.threads.get(thread_id))["metadata"]["owner"] == "user-b"
    assert await a.threads.search(metadata=tag) == []
    assert await a.threads.count(metadata=tag) == 0
    assert (await status_error(a.threads.get(thread_id)))[0] == 404
    assert [t["thread_id"] for t in await b.threads.search(metadata=tag)] == [thread_id]


async def test_an_assistant_update_cannot_hand_the_assistant_to_another_user(
    users: tuple[Sdk, Sdk],
) -> None:
    a, b = users
    tag = new_tag()
    assistant = await b.assistants.create("agent", metadata=tag)
    assistant_id = assistant["assistant_id"]
    updated = await b.assistants.update(assistant_id, metadata={"owner": "user-a"})
    assert updated["metadata"]["owner"] == "user-b"
    assert (await b.assistants.get(assistant_id))["metadata"]["owner"] == "user-b"
    assert await a.assistants.search(metadata=tag) == []
    assert (await status_error(a.assistants.get(assistant_id)))[0] == 404
    versions = await b.assistants.get_versions(assistant_id)
    assert all(version["metadata"]["owner"] == "user-b" for version in versions)


async def test_a_cron_update_cannot_hand_the_cron_to_another_user(
    users: tuple[Sdk, Sdk],
) -> None:
    a, b = users
    tag = new_tag()
    assistant = await b.assistants.create("agent", metadata=tag)
    thread = await b.threads.create(metadata=tag)
    cron = await b.crons.create_for_thread(
        thread["thread_id"], assistant["assistant_id"], schedule="0 0 1 1 *", metadata=tag
    )
    try:
        updated = await b.crons.update(cron["cron_id"], metadata={"owner": "user-a"})
        assert updated["metadata"]["owner"] == "user-b"
        assert await a.crons.search(metadata=tag) == []
        assert await a.crons.count(metadata=tag) == 0
        assert [c["cron_id"] for c in await b.crons.search(metadata=tag)] == [cron["cron_id"]]
    finally:
        await b.crons.delete(cron["cron_id"])


async def test_create_handlers_stamp_over_a_planted_owner(users: tuple[Sdk, Sdk]) -> None:
    a, b = users
    tag = new_tag()
    planted = {**tag, "owner": "user-a"}
    thread = await b.threads.create(metadata=planted)
    assistant = await b.assistants.create("agent", metadata=planted)
    assert thread["metadata"]["owner"] == "user-b"
    assert assistant["metadata"]["owner"] == "user-b"
    cron = await b.crons.create_for_thread(
        thread["thread_id"], assistant["assistant_id"], schedule="0 0 1 1 *", metadata=planted
    )
    try:
        assert cron["metadata"]["owner"] == "user-b"
        assert await a.threads.search(metadata=tag) == []
        assert await a.assistants.search(metadata=tag) == []
        assert await a.crons.search(metadata=tag) == []
    finally:
        await b.crons.delete(cron["cron_id"])


async def test_a_create_run_handler_rewrites_what_the_run_executes_with(
    users: tuple[Sdk, Sdk],
) -> None:
    """LangGraph hands create_run handlers the run's kwargs and executes with them as left."""
    _, b = users
    tag = new_tag()
    thread = await b.threads.create(metadata=tag)
    assistant = await b.assistants.create("agent", metadata=tag)
    run = await b.runs.create(
        thread["thread_id"],
        assistant["assistant_id"],
        input={"messages": [{"role": "user", "content": "hello"}]},
        config={"configurable": {"owner": "user-a"}},
    )
    assert run["kwargs"]["config"]["configurable"]["owner"] == "user-b"
    await b.runs.join(thread["thread_id"], run["run_id"])
    stored = await b.runs.get(thread["thread_id"], run["run_id"])
    assert stored["status"] == "success"
    assert stored["kwargs"]["config"]["configurable"]["owner"] == "user-b"
