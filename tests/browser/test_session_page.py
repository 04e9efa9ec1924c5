"""The @langchain/react chat page (examples/web, index.html) against `runyard dev`, in headless
Chromium.

This page is on `useStream` from @langchain/react v1, which speaks the thread streaming
session: `run.start` and `input.respond` go to POST /threads/{id}/commands, events come from
POST /threads/{id}/stream/events, and a reload re-attaches to a running run by itself (the
hook reads the thread's state, sees it busy and subscribes again). The test uses the SSE
transport (the hook's default); the page and the driver also take `transport: "websocket"`.
The page, the server and the driver are set up in pages.py; session_page.mjs drives the page.

Checked by hand against `langgraph dev` (langgraph-api 0.16.7) as well: the same scenario
passes there.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.browser.pages import (
    OUTPUT,
    STORY,
    drive,
    is_growing_prefix_of,
    messages_of,
    runs_of,
)
from tests.support.runs import CHAT_REPLY
from tests.support.server import ServerProcess

# The README and docs/chat-ui.md show a copy of this screenshot (docs/browser-chat.png).
SCREENSHOT = OUTPUT / "session-page.png"
REASON = "not before Monday"
pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]


def commands(requests: list[dict[str, Any]], thread_id: str) -> list[dict[str, Any]]:
    """The session commands the page sent for a thread, in order."""
    path = f"/threads/{thread_id}/commands"
    return [json.loads(r["body"]) for r in requests if r["path"] == path]


def subscriptions(requests: list[dict[str, Any]], thread_id: str) -> list[dict[str, Any]]:
    """The event subscriptions the page opened on a thread."""
    path = f"/threads/{thread_id}/stream/events"
    return [json.loads(r["body"]) for r in requests if r["path"] == path]


def test_session_page_streams_re_attaches_answers_interrupts_and_lists_history(
    page_url: str, dev_server: ServerProcess
) -> None:
    api = dev_server.url
    options = {
        "pageUrl": page_url,
        "apiUrl": api,
        "transport": "sse",
        "greeting": CHAT_REPLY,
        "action": "please book a table",
        "actionReply": "Done: book a table.",
        "declined": "please send the invoice",
        "declinedQuestion": "Shall I send the invoice?",
        "reason": REASON,
        "declinedReply": f"All right, I will not send the invoice. Your reason: {REASON}",
    }
    report = drive("session_page.mjs", SCREENSHOT, options)
    story, first = report["storyThread"], report["firstThread"]

    # Everything went through the session: no run was started or streamed the legacy way.
    assert not [r for r in report["requests"] if "/runs" in r["path"]], report["requests"]

    # The story streamed word by word; a reload in the middle re-attached to the running run,
    # which the page then followed live to its end.
    before = report["beforeReload"]
    assert STORY.startswith(before) and before != STORY
    assert is_growing_prefix_of(report["beforeReloadReplies"], before)
    assert len(report["beforeReloadReplies"]) >= 3, report["beforeReloadReplies"]
    after = report["afterReload"]
    assert after["thread"] == story
    assert subscriptions(after["requests"], story), after["requests"]
    assert not commands(after["requests"], story), after["requests"]
    live = [t for t in after["replies"] if len(before) < len(t) < len(STORY)]
    assert live, "after the reload the reply did not stream: it was never seen in the making"
    assert is_growing_prefix_of(after["replies"], STORY)
    assert after["messages"] == ["tell me a story", STORY]
    assert [run["status"] for run in runs_of(api, story)] == ["success"]
    assert messages_of(api, story) == [("human", "tell me a story"), ("ai", STORY)]

    # The greeting streamed in token by token.
    greeting = [t for t in report["greeting"]["replies"] if t and CHAT_REPLY.startswith(t)]
    assert greeting[-1] == CHAT_REPLY
    assert len(greeting) >= len(CHAT_REPLY.split()) - 1, greeting

    # interrupt(): the approval request was shown; Approve and then Reject (with a reason)
    # answered it with input.respond, each resuming the run to its end.
    assert report["question"] == "Shall I book a table?"
    assert report["interruptGone"]
    sent = commands(report["requests"], first)
    methods = [c["method"] for c in sent]
    assert methods == ["run.start"] + ["run.start", "input.respond"] * 2, methods
    responses = [c["params"]["response"] for c in sent if c["method"] == "input.respond"]
    assert responses == [
        {"decisions": [{"type": "approve"}]},
        {"decisions": [{"type": "reject", "message": REASON}]},
    ]
    assert messages_of(api, first) == [
        ("human", "hello"),
        ("ai", CHAT_REPLY),
        ("human", "please book a table"),
        ("ai", "To book a table, I need your approval."),
        ("ai", "Done: book a table."),
        ("human", "please send the invoice"),
        ("ai", "To send the invoice, I need your approval."),
        ("ai", f"All right, I will not send the invoice. Your reason: {REASON}"),
    ]
    assert report["final"] == [text for _, text in messages_of(api, first)]

    # The history lists both conversations, newest first, titled by their first message,
    # and reopens the story.
    assert report["history"] == [
        {"id": first, "title": "hello"},
        {"id": story, "title": "tell me a story"},
    ]
    assert report["reopened"] == ["tell me a story", STORY]

    statuses = [run["status"] for run in runs_of(api, first)]
    assert len(statuses) == 5 and statuses[-1] == "success", statuses
    assert SCREENSHOT.stat().st_size > 10_000
