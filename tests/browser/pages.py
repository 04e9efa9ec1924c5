"""What the browser tests share: Chromium and node, the pages built and served on their own
origin, `runyard dev` on the repository's langgraph.json, and the driver that reports.
(conftest.py makes the fixtures visible to the tests.)

The pages are served from another port than the server, so every call they make is a
cross-origin request: this is what a chat front end such as Agent Chat UI does. Node drives
Chromium through playwright-core (the *.mjs drivers here) and prints what it saw; the
assertions are in the tests, beside what the server itself recorded.

scripts/setup installs Chromium and the npm packages; without them these tests fail and say
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

from tests.support.server import ROOT, ServerProcess, free_port

WEB = ROOT / "examples" / "web"
HERE = Path(__file__).parent
# Where screenshots are kept for a person to look at (the README and docs/chat-ui.md show a
# copy of one).
OUTPUT = HERE / "output"
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


def chromium() -> str:
    """The Chromium executable: RUNYARD_CHROMIUM, else Debian's `chromium` on the PATH."""
    path = os.environ.get("RUNYARD_CHROMIUM") or shutil.which("chromium")
    if not path:
        pytest.fail(
            "Chromium is not installed: `apt-get install chromium` (scripts/setup does it), "
            "or point RUNYARD_CHROMIUM at a Chromium or Chrome executable"
        )
    return path


def node() -> str:
    """The node executable, with the pages' npm packages installed."""
    path = shutil.which("node")
    if not path:
        pytest.fail("node is not installed: `apt-get install nodejs npm` (scripts/setup does it)")
    if not (WEB / "node_modules" / "playwright-core").is_dir():
        pytest.fail(f"the page's npm packages are missing: run `npm ci` in {WEB}")
    return path


@pytest.fixture
def page_url(tmp_path: Path) -> Iterator[str]:
    """The pages' origin, built from their current source and served on a port of their own."""
    build = subprocess.run(
        [node(), "build.mjs"], cwd=WEB, capture_output=True, text=True, timeout=120
    )
    assert build.returncode == 0, f"building the pages failed:\n{build.stdout}{build.stderr}"
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


def drive(driver: str, screenshot: Path, options: dict[str, Any]) -> dict[str, Any]:
    """Run a browser scenario (tests/browser/<driver>) and return its report."""
    screenshot.parent.mkdir(exist_ok=True)
    options = {**options, "chromium": chromium(), "screenshot": str(screenshot), "story": STORY}
    done = subprocess.run(
        [node(), str(HERE / driver), json.dumps(options)],
        capture_output=True,
        text=True,
        timeout=200,
    )
    lines = done.stdout.strip().splitlines()
    assert done.returncode == 0 and lines, f"the browser driver failed:\n{done.stderr[-4000:]}"
    report: dict[str, Any] = json.loads(lines[-1])
    if "error" in report:
        seen = "\n".join(report["consoleErrors"][-10:])
        pytest.fail(f"{report['error']}\nbrowser console:\n{seen}\n(screenshot: {screenshot})")
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


def text_of(content: Any) -> str:
    """A message's text: its content string, or the text of its content blocks."""
    if isinstance(content, list):
        return "".join(part if isinstance(part, str) else part.get("text", "") for part in content)
    return str(content)


def messages_of(api_url: str, thread_id: str) -> list[tuple[str, str]]:
    """(type, text) of the thread's messages, from the server."""
    values = httpx.get(f"{api_url}/threads/{thread_id}/state", timeout=30).json()["values"]
    return [(m["type"], text_of(m["content"])) for m in values["messages"]]
