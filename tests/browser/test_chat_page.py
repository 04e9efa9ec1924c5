"""The legacy-hook chat page (examples/web, legacy.html) against `runyard dev`, in headless
Chromium.

This page is on `useStream` from @langchain/langgraph-sdk/react, the hook Agent Chat UI uses:
runs stream over /threads/{id}/runs/stream and a reload rejoins a run with Last-Event-ID. Its
approval card answers the example agent's human-in-the-loop interrupt as Agent Chat UI does,
with a command whose resume value is `{"decisions": [...]}`. The page, the server and the
driver are set up in pages.py; chat_page.mjs drives the page.
"""

from __future__ import annotations

import json

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

SCREENSHOT = OUTPUT / "chat-page.png"
pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]


def test_chat_page_streams_interrupts_resumes_and_lists_history(
    page_url: str, dev_server: ServerProcess
) -> None:
    api = dev_server.url
    options = {
        "pageUrl": f"{page_url}legacy.html",
        "apiUrl": api,
        "greeting": CHAT_REPLY,
        "action": "please book a table",
        "actionReply": "Done: book a table.",
        "declined": "please send the invoice",
        "declinedReply": "All right, I will not send the invoice.",
    }
    report = drive("chat_page.mjs", SCREENSHOT, options)

    # The reply streamed in token by token over messages-tuple, not all at once.
    first_stream = next(r for r in report["requests"] if r["path"].endswith("/runs/stream"))
    assert "messages-tuple" in json.loads(first_stream["body"])["stream_mode"]
    replies = report["greeting"]["replies"]
    assert replies[-1] == CHAT_REPLY
    assert len(replies) >= len(CHAT_REPLY.split()) - 1, replies
    assert is_growing_prefix_of(replies, CHAT_REPLY), replies

    # interrupt(): the approval request was shown, Approve resumed the run, which finished.
    assert report["question"] == "Shall I book a table?"
    assert report["interruptGone"]
    first = report["firstThread"]
    # hello, two requests that stopped at interrupt(), the two decisions that resumed them,
    # sent as Agent Chat UI sends them.
    statuses = [run["status"] for run in runs_of(api, first)]
    assert len(statuses) == 5 and set(statuses) <= {"success", "interrupted"}, statuses
    assert statuses[-1] == "success"
    resumes = [
        json.loads(r["body"])["command"]["resume"]
        for r in report["requests"]
        if r["path"].endswith("/runs/stream") and "command" in json.loads(r["body"])
    ]
    assert resumes == [{"decisions": [{"type": "approve"}]}, {"decisions": [{"type": "reject"}]}]
    assert messages_of(api, first)[2:] == [
        ("human", "please book a table"),
        ("ai", "To book a table, I need your approval."),
        ("ai", "Done: book a table."),
        ("human", "please send the invoice"),
        ("ai", "To send the invoice, I need your approval."),
        ("ai", "All right, I will not send the invoice."),
    ]

    # The reload landed mid-run; the page rejoined the run's stream with Last-Event-ID (the
    # SDK replays from the start, "-1", and drops what it has) and followed it live to the end.
    story = report["storyThread"]
    after = report["afterReload"]
    assert after["thread"] == story
    assert STORY.startswith(report["beforeReload"]) and report["beforeReload"] != STORY
    joins = [r for r in after["requests"] if r["method"] == "GET" and r["path"].endswith("/stream")]
    assert joins and joins[0]["path"].startswith(f"/threads/{story}/runs/"), after["requests"]
    assert joins[0]["lastEventId"] is not None
    live = [t for t in after["replies"] if len(report["beforeReload"]) < len(t) < len(STORY)]
    assert live, "after the reload the reply did not stream: it was never seen in the making"
    assert is_growing_prefix_of(after["replies"], STORY)
    assert after["messages"] == ["tell me a story", STORY]
    assert [run["status"] for run in runs_of(api, story)] == ["success"]
    assert messages_of(api, story) == [("human", "tell me a story"), ("ai", STORY)]

    # The history lists both conversations, newest first, titled by their first message.
    assert report["history"] == [
        {"id": story, "title": "tell me a story"},
        {"id": first, "title": "hello"},
    ]
    assert report["reopened"][:2] == ["hello", CHAT_REPLY]
    assert SCREENSHOT.stat().st_size > 10_000
