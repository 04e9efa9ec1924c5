"""The bundled `agent` example (examples/chat.py) as Agent Chat UI drives it, over the SDK.

Agent Chat UI sends a human message's content as a list of content blocks
(`[{"type": "text", "text": ...}]`). It renders an interrupt with Approve/Reject buttons under
the last message when that one is the agent's (or there is no AI message yet), and only when
its value has LangChain's human-in-the-loop shape: `action_requests` (name, args,
description) and `review_configs` (action_name, allowed_decisions) (src/components/thread/
messages/ai.tsx, checked in headless Chromium against runyard dev). It resumes the run with
`{"decisions": [{"type": "approve"}]}` or `{"decisions": [{"type": "reject", "message": ...}]}`.
Compared against the library source: `HITLRequest` / `Decision` in langchain's
`agents/middleware/human_in_the_loop.py`, and Agent Chat UI's `isAgentInboxInterruptSchema`
(src/lib/agent-inbox-interrupt.ts), whose test is `is_hitl_request` below.
"""

from __future__ import annotations

from typing import Any

import pytest
from langgraph_sdk.client import LangGraphClient

from tests.support.runs import CHAT_REPLY, new_thread

pytestmark = pytest.mark.timeout(60)


def blocks(text: str) -> dict[str, Any]:
    """A human message as Agent Chat UI sends it: content as a list of content blocks."""
    return {"type": "human", "content": [{"type": "text", "text": text}]}


def is_hitl_request(value: Any) -> bool:
    """Agent Chat UI's test for an interrupt it renders with Approve/Reject buttons."""
    if not isinstance(value, dict):
        return False
    requests, configs = value.get("action_requests"), value.get("review_configs")
    if not isinstance(requests, list) or not requests:
        return False
    if not isinstance(configs, list) or not configs:
        return False
    return all(
        isinstance(r, dict) and isinstance(r.get("name"), str) and isinstance(r.get("args"), dict)
        for r in requests
    ) and all(
        isinstance(c, dict)
        and isinstance(c.get("action_name"), str)
        and isinstance(c.get("allowed_decisions"), list)
        for c in configs
    )


async def last_reply(client: LangGraphClient, thread_id: str) -> Any:
    """The content of the thread's newest message."""
    state = await client.threads.get_state(thread_id)
    return dict(state["values"])["messages"][-1]["content"]


async def ask(
    client: LangGraphClient, thread_id: str, text: str, *, as_blocks: bool = False
) -> dict[str, Any]:
    """Send one message, wait for the run, and return the pending interrupt."""
    message = blocks(text) if as_blocks else {"type": "human", "content": text}
    await client.runs.wait(thread_id, "agent", input={"messages": [message]})
    state = await client.threads.get_state(thread_id)
    interrupts = state["interrupts"]
    assert len(interrupts) == 1, state
    return dict(interrupts[0])


async def test_content_blocks_are_read_as_text(client: LangGraphClient) -> None:
    thread_id = await new_thread(client)
    await client.runs.wait(thread_id, "agent", input={"messages": [blocks("hello")]})
    assert await last_reply(client, thread_id) == CHAT_REPLY
    two = {"type": "human", "content": [{"type": "text", "text": "just"}, " words"]}
    await client.runs.wait(thread_id, "agent", input={"messages": [two]})
    assert await last_reply(client, thread_id) == "You said: just words"


async def test_an_action_asks_for_approval_in_the_human_in_the_loop_shape(
    client: LangGraphClient,
) -> None:
    thread_id = await new_thread(client)
    interrupt = await ask(client, thread_id, "please book a table")
    value = interrupt["value"]
    assert is_hitl_request(value), value
    request = {"name": "carry_out", "args": {"action": "book a table"}}
    review = {"action_name": "carry_out", "allowed_decisions": ["approve", "reject"]}
    assert value == {
        "action_requests": [{**request, "description": "Shall I book a table?"}],
        "review_configs": [review],
    }
    assert (await client.threads.get(thread_id))["status"] == "interrupted"
    # Agent Chat UI draws the request under the last message only when that one is the
    # agent's (or when there is no AI message yet): the agent's proposal ends the turn.
    state = await client.threads.get_state(thread_id)
    last = dict(state["values"])["messages"][-1]
    assert (last["type"], last["content"]) == ("ai", "To book a table, I need your approval.")


async def test_an_approve_decision_carries_the_action_out(client: LangGraphClient) -> None:
    thread_id = await new_thread(client)
    await ask(client, thread_id, "please book a table", as_blocks=True)
    # What Agent Chat UI sends: submit({}, {command: {resume: {decisions: [...]}}}).
    resume = {"decisions": [{"type": "approve"}]}
    await client.runs.wait(thread_id, "agent", input={}, command={"resume": resume})
    assert await last_reply(client, thread_id) == "Done: book a table."
    assert (await client.threads.get(thread_id))["status"] == "idle"


async def test_a_reject_decision_declines_and_keeps_the_reason(client: LangGraphClient) -> None:
    thread_id = await new_thread(client)
    await ask(client, thread_id, "please send the invoice")
    resume = {"decisions": [{"type": "reject", "message": "not before Monday"}]}
    await client.runs.wait(thread_id, "agent", input={}, command={"resume": resume})
    assert await last_reply(client, thread_id) == (
        "All right, I will not send the invoice. Your reason: not before Monday"
    )
    await ask(client, thread_id, "please send the invoice")
    bare = {"decisions": [{"type": "reject"}]}
    await client.runs.wait(thread_id, "agent", command={"resume": bare})
    assert await last_reply(client, thread_id) == "All right, I will not send the invoice."


async def test_a_plain_yes_or_no_still_answers(client: LangGraphClient) -> None:
    """Clients that answer with text (A2A, MCP, a script) resume it with a word."""
    thread_id = await new_thread(client)
    await ask(client, thread_id, "please book a table")
    await client.runs.wait(thread_id, "agent", command={"resume": "yes"})
    assert await last_reply(client, thread_id) == "Done: book a table."
    await ask(client, thread_id, "please send the invoice")
    await client.runs.wait(thread_id, "agent", command={"resume": "no"})
    assert await last_reply(client, thread_id) == "All right, I will not send the invoice."


async def test_a_decision_the_request_does_not_allow_fails_the_run(
    client: LangGraphClient,
) -> None:
    """As LangChain's middleware does: an `edit` where only approve/reject are allowed."""
    thread_id = await new_thread(client)
    await ask(client, thread_id, "please book a table")
    edit = {"type": "edit", "edited_action": {"name": "carry_out", "args": {"action": "x"}}}
    run = await client.runs.create(thread_id, "agent", command={"resume": {"decisions": [edit]}})
    await client.runs.join(thread_id, run["run_id"])
    ended = await client.runs.get(thread_id, run["run_id"])
    assert ended["status"] == "error"
    assert await last_reply(client, thread_id) != "Done: x."
