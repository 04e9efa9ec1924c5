"""Human in the loop: interrupt(), the __interrupt__ payloads, and resuming with a command."""

from __future__ import annotations

import re

from langgraph_sdk.client import LangGraphClient

from tests.support.runs import (
    collect,
    data_of,
    kwargs_of,
    names,
    new_thread,
    values_of,
)

QUESTION = {"question": "Approve this action?", "draft": "About to: deploy"}


def check_interrupts(interrupts: list[dict[str, object]], value: object) -> None:
    """One interrupt carrying `value`, with LangGraph's 32-hex id."""
    assert len(interrupts) == 1
    (item,) = interrupts
    assert item["value"] == value
    assert re.fullmatch(r"[0-9a-f]{32}", str(item["id"])), item["id"]


async def test_stream_reports_the_interrupt(client: LangGraphClient) -> None:
    thread_id = await new_thread(client)
    parts = await collect(
        client.runs.stream(
            thread_id,
            "approval",
            input={"request": "deploy"},
            stream_mode=["values", "updates"],
            if_not_exists="create",
        )
    )
    updates = data_of(parts, "updates")
    assert updates[0] == {"draft": {"draft": "About to: deploy"}}
    check_interrupts(updates[-1]["__interrupt__"], QUESTION)
    assert names(parts)[-2:] == ["updates", "values"]
    check_interrupts(data_of(parts, "values")[-1]["__interrupt__"], QUESTION)
    (run,) = await client.runs.list(thread_id)
    # A run that stops at interrupt() has done its work: it ends in success.
    assert run["status"] == "success"


async def test_values_only_stream_still_reports_the_interrupt(client: LangGraphClient) -> None:
    thread_id = await new_thread(client)
    parts = await collect(
        client.runs.stream(
            thread_id, "approval", input={"request": "deploy"}, if_not_exists="create"
        )
    )
    assert set(names(parts)) == {"metadata", "values"}
    check_interrupts(data_of(parts, "values")[-1]["__interrupt__"], QUESTION)


PAUSED_VALUES = {"request": "deploy", "draft": "About to: deploy"}


async def test_wait_and_join_return_the_values_beside_the_interrupt(
    client: LangGraphClient,
) -> None:
    # Reference: `langgraph dev` (langgraph-api 0.16.7) answers /wait and /join of a run
    # stopped at interrupt() with the thread's values and `__interrupt__` beside them:
    # {"request": "x", "draft": "About to: x", "__interrupt__": [...]}.
    thread_id = await new_thread(client)
    body = await client.runs.wait(
        thread_id, "approval", input={"request": "deploy"}, if_not_exists="create"
    )
    assert isinstance(body, dict)
    assert list(body) == [*PAUSED_VALUES, "__interrupt__"]
    assert {k: body[k] for k in PAUSED_VALUES} == PAUSED_VALUES
    check_interrupts(body["__interrupt__"], QUESTION)
    (run,) = await client.runs.list(thread_id)
    joined = await client.runs.join(thread_id, run["run_id"])
    assert joined == body

    queued = await client.runs.create(thread_id, "approval", input={"request": "deploy"})
    joined_while_running = await client.runs.join(thread_id, queued["run_id"])
    assert {k: joined_while_running[k] for k in PAUSED_VALUES} == PAUSED_VALUES
    check_interrupts(joined_while_running["__interrupt__"], QUESTION)


async def test_stateless_wait_returns_the_values_beside_the_interrupt(
    client: LangGraphClient,
) -> None:
    body = await client.runs.wait(None, "approval", input={"request": "deploy"})
    assert isinstance(body, dict)
    assert {k: body[k] for k in PAUSED_VALUES} == PAUSED_VALUES
    check_interrupts(body["__interrupt__"], QUESTION)


async def test_resume_with_a_command_finishes_the_graph(client: LangGraphClient) -> None:
    thread_id = await new_thread(client)
    await client.runs.wait(
        thread_id, "approval", input={"request": "deploy"}, if_not_exists="create"
    )
    parts = await collect(
        client.runs.stream(
            thread_id, "approval", command={"resume": {"approved": True}}, stream_mode="updates"
        )
    )
    assert data_of(parts, "updates") == [
        {"ask_human": {"approved": True}},
        {"act": {"result": "done: deploy"}},
    ]
    runs = await client.runs.list(thread_id)
    assert [r["status"] for r in runs] == ["success", "success"]
    assert kwargs_of(runs[0])["command"] == {"resume": {"approved": True}}


async def test_resume_with_a_refusal(client: LangGraphClient) -> None:
    thread_id = await new_thread(client)
    await client.runs.wait(
        thread_id, "approval", input={"request": "deploy"}, if_not_exists="create"
    )
    result = await client.runs.wait(thread_id, "approval", command={"resume": False})
    assert result == {
        "request": "deploy",
        "draft": "About to: deploy",
        "approved": False,
        "result": "cancelled by the reviewer",
    }


async def test_resume_with_update_changes_state_before_resuming(client: LangGraphClient) -> None:
    thread_id = await new_thread(client)
    await client.runs.wait(
        thread_id, "approval", input={"request": "deploy"}, if_not_exists="create"
    )
    result = await client.runs.wait(
        thread_id, "approval", command={"resume": True, "update": {"request": "rollout"}}
    )
    assert isinstance(result, dict)
    assert result["result"] == "done: rollout"


async def test_asker_interrupt_carries_state_and_resume_value(client: LangGraphClient) -> None:
    thread_id = await new_thread(client)
    body = await client.runs.wait(thread_id, "asker", input={"value": 42}, if_not_exists="create")
    assert isinstance(body, dict)
    check_interrupts(body["__interrupt__"], {"question": "continue?", "value": 42})
    result = await client.runs.wait(thread_id, "asker", command={"resume": "yes"})
    assert result == {"value": 42, "seen": ["echo", "answer:yes"]}


async def test_background_run_interrupts_and_background_resume(client: LangGraphClient) -> None:
    thread_id = await new_thread(client)
    run = await client.runs.create(thread_id, "asker", input={"value": "v"}, if_not_exists="create")
    joined = await client.runs.join(thread_id, run["run_id"])
    check_interrupts(joined["__interrupt__"], {"question": "continue?", "value": "v"})
    resumed = await client.runs.create(thread_id, "asker", command={"resume": "ok"})
    result = await client.runs.join(thread_id, resumed["run_id"])
    assert result == {"value": "v", "seen": ["echo", "answer:ok"]}


async def test_new_input_on_an_interrupted_thread_starts_over(client: LangGraphClient) -> None:
    thread_id = await new_thread(client)
    await client.runs.wait(thread_id, "asker", input={"value": 1}, if_not_exists="create")
    body = await client.runs.wait(thread_id, "asker", input={"value": 2})
    assert isinstance(body, dict)
    check_interrupts(body["__interrupt__"], {"question": "continue?", "value": 2})


# --- thread state (needs the threads API) -------------------------------------------------------


async def test_interrupted_thread_status_and_interrupts(client: LangGraphClient) -> None:
    thread_id = await new_thread(client)
    body = await client.runs.wait(
        thread_id, "approval", input={"request": "deploy"}, if_not_exists="create"
    )
    assert isinstance(body, dict)
    interrupt_id = body["__interrupt__"][0]["id"]
    thread = await client.threads.get(thread_id)
    assert thread["status"] == "interrupted"
    (task_interrupts,) = thread["interrupts"].values()
    assert [i["id"] for i in task_interrupts] == [interrupt_id]
    assert task_interrupts[0]["value"] == QUESTION
    state = await client.threads.get_state(thread_id)
    assert state["next"] == ["ask_human"]

    await client.runs.wait(thread_id, "approval", command={"resume": True})
    thread = await client.threads.get(thread_id)
    assert thread["status"] == "idle"
    assert thread["interrupts"] == {}
    assert values_of(thread)["result"] == "done: deploy"


async def test_update_state_then_resume(client: LangGraphClient) -> None:
    thread_id = await new_thread(client)
    await client.runs.wait(
        thread_id, "approval", input={"request": "deploy"}, if_not_exists="create"
    )
    await client.threads.update_state(thread_id, {"request": "rewritten"})
    result = await client.runs.wait(thread_id, "approval", command={"resume": True})
    assert isinstance(result, dict)
    assert result["result"] == "done: rewritten"
    assert (await client.threads.get(thread_id))["status"] == "idle"
