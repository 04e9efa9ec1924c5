"""The example chat page (examples/web, useStream) against `runyard dev`, in headless Chromium.

The page is served from its own origin (another port), so every call it makes is a
cross-origin request: this is what a chat front end such as Agent Chat UI does. Node drives
Chromium through playwright-core (tests/browser/chat_page.mjs) and reports what it saw; the
assertions are here, beside what the server itself recorded.

scripts/test installs Chromium and the npm packages; without them this test fails and says
what is missing.
"""

from __future__ import annotations

import importlib.util
import itertools
import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.runs import CHAT_REPLY
from tests.support.server import ROOT, ServerProcess, free_port

WEB = ROOT / "examples" / "web"
DRIVER = Path(__file__).with_name("chat_page.mjs")
# Where the screenshot is kept for a person to look at (the README shows a copy of it).
SCREENSHOT = Path(__file__).with_name("output") / "chat-page.png"
# Slow enough that a reload lands in the middle of the story, whatever the machine's load.
TOKEN_DELAY = "0.15"


def example_story() -> str:
    """The long reply of the example agent (examples/chat.py), loaded from its file."""
    spec = importlib.util.spec_from_file_location("example_chat", ROOT / "examples" / "chat.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return str(module.STORY)


STORY = example_story()
pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]


def chromium() -> str:
    """The Chromium executable: RUNYARD_CHROMIUM, else Debian's `chromium` on the PATH."""
    path = os.environ.get("RUNYARD_CHROMIUM") or shutil.which("chromium")
    if not path:
        pytest.fail(
            "Chromium is not installed: `apt-get install chromium` (scripts/test does it), "
            "or point RUNYARD_CHROMIUM at a Chromium or Chrome executable"
        )
    return path


def node() -> str:
    """The node executable, with the page's npm packages installed."""
    path = shutil.which("node")
    if not path:
        pytest.fail("node is not installed: `apt-get install nodejs npm` (scripts/test does it)")
    if not (WEB / "node_modules" / "playwright-core").is_dir():
        pytest.fail(f"the page's npm packages are missing: run `npm ci` in {WEB}")
    return path


@pytest.fixture
def page_url(tmp_path: Path) -> Iterator[str]:
    """The chat page, built from its current source and served on a port of its own."""
    build = subprocess.run(
        [node(), "build.mjs"], cwd=WEB, capture_output=True, text=True, timeout=120
    )
    assert build.returncode == 0, f"building the page failed:\n{build.stdout}{build.stderr}"
    port = free_port()
    log = (tmp_path / "page.log").open("w")
    page = subprocess.Popen(
        [node(), "serve.mjs", "--port", str(port)], cwd=WEB, stdout=log, stderr=log
    )
    try:
        url = f"http://127.0.0.1:{port}/"
        for _ in range(100):
            try:
                if httpx.get(url, timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if page.poll() is not None:
                pytest.fail(f"the page server exited: {(tmp_path / 'page.log').read_text()}")
            time.sleep(0.1)
        yield url
    finally:
        page.terminate()
        page.wait(timeout=10)
        log.close()


@pytest.fixture
def dev_server(tmp_path: Path) -> Iterator[ServerProcess]:
    """`runyard dev` with the repository's own langgraph.json, as a new user runs it."""
    server = ServerProcess(
        "dev",
        tmp_path / "dev",
        env={"RUNYARD_CHAT_TOKEN_DELAY": TOKEN_DELAY},
        config=ROOT / "langgraph.json",
    )
    server.start()
    try:
        yield server
    finally:
        server.stop()


def drive(page_url: str, api_url: str) -> dict[str, Any]:
    """Run the browser scenario and return its report."""
    SCREENSHOT.parent.mkdir(exist_ok=True)
    options = {
        "pageUrl": page_url,
        "apiUrl": api_url,
        "chromium": chromium(),
        "screenshot": str(SCREENSHOT),
        "greeting": CHAT_REPLY,
        "action": "please book a table",
        "actionReply": "Done: book a table.",
        "declined": "please send the invoice",
        "declinedReply": "All right, I will not send the invoice.",
        "story": STORY,
    }
    done = subprocess.run(
        [node(), str(DRIVER), json.dumps(options)], capture_output=True, text=True, timeout=200
    )
    lines = done.stdout.strip().splitlines()
    assert done.returncode == 0 and lines, f"the browser driver failed:\n{done.stderr[-4000:]}"
    report: dict[str, Any] = json.loads(lines[-1])
    if "error" in report:
        seen = "\n".join(report["consoleErrors"][-10:])
        pytest.fail(f"{report['error']}\nbrowser console:\n{seen}\n(screenshot: {SCREENSHOT})")
    return report


def is_growing_prefix_of(texts: list[str], final: str) -> bool:
    """Each text extends the one before it, and all lead to `final`."""
    return all(final.startswith(t) for t in texts) and all(
        len(a) < len(b) for a, b in itertools.pairwise(texts)
    )


def runs_of(api_url: str, thread_id: str) -> list[dict[str, Any]]:
    """The thread's runs, oldest first."""
    runs = httpx.get(f"{api_url}/threads/{thread_id}/runs", timeout=30).json()
    return sorted(runs, key=lambda run: run["created_at"])


def messages_of(api_url: str, thread_id: str) -> list[tuple[str, str]]:
    """(type, text) of the thread's messages, from the server."""
    values = httpx.get(f"{api_url}/threads/{thread_id}/state", timeout=30).json()["values"]
    return [(m["type"], m["content"]) for m in values["messages"]]


def test_chat_page_streams_interrupts_resumes_and_lists_history(
    page_url: str, dev_server: ServerProcess
) -> None:
    api = dev_server.url
    report = drive(page_url, api)

    # The reply streamed in token by token over messages-tuple, not all at once.
    first_stream = next(r for r in report["requests"] if r["path"].endswith("/runs/stream"))
    assert "messages-tuple" in json.loads(first_stream["body"])["stream_mode"]
    replies = report["greeting"]["replies"]
    assert replies[-1] == CHAT_REPLY
    assert len(replies) >= len(CHAT_REPLY.split()) - 1, replies
    assert is_growing_prefix_of(replies, CHAT_REPLY), replies

    # interrupt(): the question was shown, the answer resumed the run, which finished.
    assert report["question"] == "Shall I book a table?"
    assert report["interruptGone"]
    first = report["firstThread"]
    # hello, two requests that stopped at interrupt(), the two answers that resumed them.
    statuses = [run["status"] for run in runs_of(api, first)]
    assert len(statuses) == 5 and set(statuses) <= {"success", "interrupted"}, statuses
    assert statuses[-1] == "success"
    assert messages_of(api, first)[2:] == [
        ("human", "please book a table"),
        ("ai", "Done: book a table."),
        ("human", "please send the invoice"),
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
