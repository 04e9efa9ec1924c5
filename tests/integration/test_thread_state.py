"""Thread state: read, update as a node, checkpoints, history, supersteps, delete and runs."""

from __future__ import annotations

import uuid
from typing import Any

import httpx

from tests.support.runs import new_tag, status_error, wait_for_status

# langgraph-sdk's TypedDicts lag the protocol (Thread has no `error` or `config`, checkpoints
# must name every key), so the tests read its answers as the plain JSON they are.
Sdk = Any

STATE_KEYS = {
    "values",
    "next",
    "tasks",
    "metadata",
    "created_at",
    "checkpoint",
    "parent_checkpoint",
    "checkpoint_id",
    "parent_checkpoint_id",
    "interrupts",
}


async def pipeline_thread(client: Sdk) -> str:
    """A thread bound to the pipeline graph, with no state yet."""
    thread = await client.threads.create(metadata=new_tag(), graph_id="pipeline")
    return str(thread["thread_id"])


async def test_a_new_thread_has_an_empty_state_and_no_history(client: Sdk) -> None:
    for graph_id in (None, "pipeline"):
        thread = await client.threads.create(metadata=new_tag(), graph_id=graph_id)
        state = await client.threads.get_state(thread["thread_id"])
        assert set(state) == STATE_KEYS
        assert state["values"] == {} and state["next"] == [] and state["tasks"] == []
        assert state["checkpoint"]["checkpoint_id"] is None
        assert await client.threads.get_history(thread["thread_id"]) == []


async def test_update_state_as_node_moves_the_graph_forward(client: Sdk) -> None:
    thread_id = await pipeline_thread(client)
    written = await client.threads.update_state(
        thread_id, {"text": "one two three"}, as_node="tokenize"
    )
    checkpoint = written["checkpoint"]
    assert checkpoint["thread_id"] == thread_id
    assert checkpoint["checkpoint_ns"] == ""
    assert checkpoint["checkpoint_id"]

    state = await client.threads.get_state(thread_id)
    assert set(state) == STATE_KEYS
    assert state["values"] == {"text": "one two three", "steps": []}
    assert state["next"] == ["analyze"]
    assert [task["name"] for task in state["tasks"]] == ["analyze"]
    assert state["checkpoint"]["checkpoint_id"] == checkpoint["checkpoint_id"]
    assert state["metadata"]["source"] == "update"
    assert state["created_at"]

    # The thread row caches the new values; pending work leaves it interrupted, as LangGraph.
    thread = await client.threads.get(thread_id)
    assert thread["values"] == state["values"]
    assert thread["status"] == "interrupted"
    assert thread["interrupts"] == {}

    await client.threads.update_state(
        thread_id, {"steps": ["report"], "summary": "done"}, as_node="report"
    )
    final = await client.threads.get_state(thread_id)
    assert final["next"] == []
    assert final["values"]["summary"] == "done"
    assert final["parent_checkpoint"]["checkpoint_id"] == checkpoint["checkpoint_id"]
    thread = await client.threads.get(thread_id)
    assert thread["status"] == "idle"
    assert thread["values"]["steps"] == ["report"]


async def test_update_state_without_a_graph_is_400(client: Sdk) -> None:
    thread = await client.threads.create(metadata=new_tag())
    status, detail = await status_error(
        client.threads.update_state(thread["thread_id"], {"text": "x"}, as_node="tokenize")
    )
    assert status == 400
    assert "no graph" in detail


async def test_update_state_with_an_unknown_node_is_400_and_writes_nothing(
    client: Sdk,
) -> None:
    thread_id = await pipeline_thread(client)
    await client.threads.update_state(thread_id, {"text": "a"}, as_node="tokenize")
    before = await client.threads.get_history(thread_id)
    status, detail = await status_error(
        client.threads.update_state(thread_id, {"text": "b"}, as_node="no_such_node")
    )
    assert status == 400
    assert "no_such_node" in detail
    assert await client.threads.get_history(thread_id) == before
    assert (await client.threads.get(thread_id))["values"]["text"] == "a"


async def test_state_at_a_checkpoint_and_unknown_checkpoints(client: Sdk) -> None:
    thread_id = await pipeline_thread(client)
    first = await client.threads.update_state(thread_id, {"text": "first"}, as_node="tokenize")
    await client.threads.update_state(thread_id, {"text": "second"}, as_node="tokenize")
    first_id = first["checkpoint"]["checkpoint_id"]

    by_id = await client.threads.get_state(thread_id, checkpoint_id=first_id)
    assert by_id["values"]["text"] == "first"
    assert by_id["checkpoint"]["checkpoint_id"] == first_id
    by_body = await client.threads.get_state(
        thread_id,
        checkpoint={"checkpoint_id": first_id},
    )
    assert by_body == by_id
    latest = await client.threads.get_state(thread_id, checkpoint={"checkpoint_ns": ""})
    assert latest["values"]["text"] == "second"

    unknown = "1f000000-0000-6000-8000-000000000000"
    for call in (
        client.threads.get_state(thread_id, checkpoint_id=unknown),
        client.threads.get_state(thread_id, checkpoint={"checkpoint_id": unknown}),
        client.threads.update_state(thread_id, {"text": "x"}, checkpoint_id=unknown),
        client.threads.update_state(
            thread_id,
            {"text": "x"},
            as_node="tokenize",
            checkpoint={"checkpoint_id": unknown},
        ),
    ):
        status, detail = await status_error(call)
        assert status == 404
        assert unknown in detail


async def test_update_from_an_older_checkpoint_forks_the_thread(client: Sdk) -> None:
    thread_id = await pipeline_thread(client)
    first = await client.threads.update_state(thread_id, {"text": "a"}, as_node="tokenize")
    await client.threads.update_state(thread_id, {"steps": ["analyze"]}, as_node="analyze")
    forked = await client.threads.update_state(
        thread_id,
        {"steps": ["forked"]},
        as_node="analyze",
        checkpoint={"checkpoint_id": first["checkpoint"]["checkpoint_id"]},
    )
    state = await client.threads.get_state(thread_id)
    assert state["checkpoint"]["checkpoint_id"] == forked["checkpoint"]["checkpoint_id"]
    assert state["values"]["steps"] == ["forked"]
    assert state["parent_checkpoint"]["checkpoint_id"] == first["checkpoint"]["checkpoint_id"]
    assert (await client.threads.get(thread_id))["values"]["steps"] == ["forked"]


async def test_history_is_newest_first_with_limit_before_and_metadata(
    client: Sdk, base_url: str
) -> None:
    thread_id = await pipeline_thread(client)
    ids = []
    for text in ("one", "two", "three"):
        written = await client.threads.update_state(thread_id, {"text": text}, as_node="tokenize")
        ids.append(written["checkpoint"]["checkpoint_id"])

    history = await client.threads.get_history(thread_id)
    assert [s["checkpoint"]["checkpoint_id"] for s in history] == ids[::-1]
    assert [s["values"]["text"] for s in history] == ["three", "two", "one"]
    assert history[0] == await client.threads.get_state(thread_id)

    assert len(await client.threads.get_history(thread_id, limit=2)) == 2
    older = await client.threads.get_history(thread_id, before=ids[2])
    assert [s["checkpoint"]["checkpoint_id"] for s in older] == [ids[1], ids[0]]
    older_by_dict = await client.threads.get_history(
        thread_id,
        before={"checkpoint_id": ids[1]},
    )
    assert [s["checkpoint"]["checkpoint_id"] for s in older_by_dict] == [ids[0]]
    # Reference: `langgraph dev` (langgraph-api 0.16.7) honours `before` as the config object
    # the SDK documents (a RunnableConfig); there the plain id answers 422 and the flat
    # object 500, both kept working here.
    older_by_config = await client.threads.get_history(
        thread_id, before={"configurable": {"checkpoint_id": ids[2]}}
    )
    assert [s["checkpoint"]["checkpoint_id"] for s in older_by_config] == [ids[1], ids[0]]
    assert len(await client.threads.get_history(thread_id, metadata={"source": "update"})) == 3
    assert await client.threads.get_history(thread_id, metadata={"source": "loop"}) == []

    async with httpx.AsyncClient(base_url=base_url) as http:
        response = await http.get(f"/threads/{thread_id}/history", params={"limit": 1})
        assert response.status_code == 200
        assert [s["checkpoint"]["checkpoint_id"] for s in response.json()] == [ids[2]]
        response = await http.get(f"/threads/{thread_id}/history", params={"before": ids[2]})
        assert len(response.json()) == 2


async def test_many_states_page_with_the_default_limit_of_ten(client: Sdk) -> None:
    thread_id = await pipeline_thread(client)
    for index in range(12):
        await client.threads.update_state(thread_id, {"text": str(index)}, as_node="tokenize")
    assert len(await client.threads.get_history(thread_id)) == 10
    assert len(await client.threads.get_history(thread_id, limit=100)) == 12


async def test_create_with_supersteps_applies_them(client: Sdk) -> None:
    tag = new_tag()
    thread = await client.threads.create(
        metadata=tag,
        graph_id="pipeline",
        supersteps=[
            {"updates": [{"values": {"text": "a b"}, "as_node": "tokenize"}]},
            {"updates": [{"values": {"steps": ["analyze"]}, "as_node": "analyze"}]},
        ],
    )
    assert thread["values"] == {"text": "a b", "steps": ["analyze"]}
    assert thread["status"] == "interrupted"
    state = await client.threads.get_state(thread["thread_id"])
    assert state["next"] == ["report"]
    assert len(await client.threads.get_history(thread["thread_id"])) == 2


async def test_failed_supersteps_leave_nothing_behind(client: Sdk) -> None:
    thread_id = str(uuid.uuid4())
    bad_step = [{"updates": [{"values": {"text": "a"}, "as_node": "no_such_node"}]}]
    status, _ = await status_error(
        client.threads.create(thread_id=thread_id, graph_id="pipeline", supersteps=bad_step)
    )
    assert status == 400
    assert (await status_error(client.threads.get(thread_id)))[0] == 404

    status, detail = await status_error(
        client.threads.create(
            thread_id=thread_id,
            supersteps=[{"updates": [{"values": {"text": "a"}, "as_node": "tokenize"}]}],
        )
    )
    assert status == 422 and "graph_id" in detail
    status, detail = await status_error(
        client.threads.create(
            thread_id=thread_id,
            graph_id="no_such_graph",
            supersteps=[{"updates": [{"values": {}, "as_node": "tokenize"}]}],
        )
    )
    assert status == 422 and "no_such_graph" in detail
    assert (await status_error(client.threads.get(thread_id)))[0] == 404

    # The same id is free, and carries no leftover checkpoint.
    await client.threads.create(thread_id=thread_id, graph_id="pipeline")
    assert await client.threads.get_history(thread_id) == []


async def test_delete_removes_state_and_checkpoints(client: Sdk) -> None:
    thread_id = await pipeline_thread(client)
    await client.threads.update_state(thread_id, {"text": "a"}, as_node="tokenize")
    await client.threads.delete(thread_id)
    assert (await status_error(client.threads.get_state(thread_id)))[0] == 404
    await client.threads.create(thread_id=thread_id, graph_id="pipeline")
    assert (await client.threads.get_state(thread_id))["values"] == {}
    assert await client.threads.get_history(thread_id) == []


# --- with runs ---------------------------------------------------------------------------------


async def test_interrupted_run_then_update_state_refreshes_interrupts(
    client: Sdk,
) -> None:
    thread = await client.threads.create(metadata=new_tag())
    thread_id = thread["thread_id"]
    await client.runs.wait(thread_id, "approval", input={"request": "deploy"})
    paused = await client.threads.get(thread_id)
    assert paused["status"] == "interrupted"
    assert paused["metadata"]["graph_id"] == "approval"
    [(task_id, interrupts)] = paused["interrupts"].items()
    assert interrupts[0]["value"]["question"] == "Approve this action?"
    state = await client.threads.get_state(thread_id)
    assert state["tasks"][0]["id"] == task_id
    assert state["interrupts"][0]["id"] == interrupts[0]["id"]

    await client.threads.update_state(thread_id, {"approved": True}, as_node="ask_human")
    answered = await client.threads.get(thread_id)
    assert answered["interrupts"] == {}
    assert answered["values"]["approved"] is True
    assert (await client.threads.get_state(thread_id))["next"] == ["act"]

    await client.threads.update_state(thread_id, {"result": "done"}, as_node="act")
    assert (await client.threads.get(thread_id))["status"] == "idle"


async def test_update_state_is_409_while_a_run_is_active(client: Sdk) -> None:
    thread = await client.threads.create(metadata=new_tag())
    thread_id = thread["thread_id"]
    run = await client.runs.create(thread_id, "slow", input={"seconds": 1.0})
    status, detail = await status_error(
        client.threads.update_state(thread_id, {"steps": ["x"]}, as_node="first")
    )
    assert status == 409
    assert "run" in detail
    await client.runs.join(thread_id, run["run_id"])
    await wait_for_status(client, thread_id, run["run_id"], {"success"})
    await client.threads.update_state(thread_id, {"steps": ["x"]}, as_node="second")


async def test_delete_removes_the_threads_runs(client: Sdk) -> None:
    thread = await client.threads.create(metadata=new_tag())
    thread_id = thread["thread_id"]
    await client.runs.wait(thread_id, "pipeline", input={"text": "a"})
    [run] = await client.runs.list(thread_id)
    await client.threads.delete(thread_id)
    assert (await status_error(client.runs.get(thread_id, run["run_id"])))[0] == 404


async def test_state_with_subgraphs_nests_the_subgraph_state(client: Sdk) -> None:
    thread = await client.threads.create(metadata=new_tag())
    thread_id = thread["thread_id"]
    await client.runs.wait(thread_id, "subgraph", input={"steps": []}, interrupt_before=["child"])
    flat = await client.threads.get_state(thread_id)
    nested = await client.threads.get_state(thread_id, subgraphs=True)
    assert nested["values"] == flat["values"] == {"steps": ["parent_start"]}
    assert [task["name"] for task in nested["tasks"]] == ["child"]
    assert "values" not in (flat["tasks"][0]["state"] or {})
    child_state = nested["tasks"][0]["state"]
    assert child_state is not None and "values" in child_state
    assert child_state["checkpoint"]["checkpoint_ns"].startswith("child:")


async def test_update_with_a_huge_integer_is_stored_or_refused_cleanly(
    client: Sdk, base_url: str
) -> None:
    thread_id = await pipeline_thread(client)
    async with httpx.AsyncClient(base_url=base_url, timeout=30) as http:
        answer = await http.post(
            f"/threads/{thread_id}/state",
            json={"values": {"text": "x", "word_count": 2**70}, "as_node": "tokenize"},
        )
    state = await client.threads.get_state(thread_id)
    if answer.status_code == 200:
        assert state["values"]["word_count"] == 2**70
    else:
        # A backend that cannot store the value says so, and nothing is half-written.
        assert 400 <= answer.status_code < 500, answer.text
        assert state["checkpoint"]["checkpoint_id"] is None
