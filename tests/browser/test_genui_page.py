"""The generative UI page (examples/web, genui.html) in headless Chromium: `useStream` from
@langchain/langgraph-sdk/react and `LoadExternalComponent` against the genui test project
(tests/projects/genui), on `runyard dev` building the UI at start.

The page asks for the weather; the graph pushes a `weather` component with
`push_ui_message`; the page asks POST /ui/agent for its tags, loads the bundle built from
ui.tsx into a shadow root and renders the component with the pushed props. After a reload
the thread's `ui` values render it again. The page's origin forwards GET /ui/ to the server
(serve.mjs --api), as the tags name the assets by path.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.browser.pages import OUTPUT, WEB, drive, node
from tests.support.server import ROOT, ServerProcess, free_port

SCREENSHOT = OUTPUT / "genui-page.png"
GENUI = ROOT / "tests" / "projects" / "genui" / "langgraph.json"
pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


@pytest.fixture
def genui_dev(tmp_path: Path) -> Iterator[ServerProcess]:
    """`runyard dev` on the genui project; it builds the UI as it starts."""
    server = ServerProcess("dev", tmp_path / "dev", config=GENUI)
    server.start(timeout=180)
    try:
        yield server
    finally:
        server.stop()


def serve_pages(tmp_path: Path, api_url: str) -> tuple[subprocess.Popen[bytes], str]:
    """The pages, built from their source, on their own origin forwarding /ui/ to `api_url`."""
    build = subprocess.run(
        [node(), "build.mjs"], cwd=WEB, capture_output=True, text=True, timeout=120
    )
    assert build.returncode == 0, f"building the pages failed:\n{build.stdout}{build.stderr}"
    port = free_port()
    with (tmp_path / "page.log").open("w") as log:
        page = subprocess.Popen(
            [node(), "serve.mjs", "--port", str(port), "--api", api_url],
            cwd=WEB,
            stdout=log,
            stderr=log,
        )
    url = f"http://127.0.0.1:{port}/"
    for _ in range(100):
        try:
            if httpx.get(url, timeout=1).status_code == 200:
                return page, url
        except httpx.HTTPError:
            time.sleep(0.1)
    page.terminate()
    pytest.fail(f"the page server did not start: {(tmp_path / 'page.log').read_text()}")


def test_pushed_component_renders_live_and_after_reload(
    tmp_path: Path, genui_dev: ServerProcess
) -> None:
    page, page_url = serve_pages(tmp_path, genui_dev.url)
    try:
        report = drive(
            "genui_page.mjs",
            SCREENSHOT,
            {"pageUrl": page_url, "apiUrl": genui_dev.url, "ask": "weather in Paris"},
        )
    finally:
        page.terminate()
        page.wait(timeout=10)
    expected = {
        "text": "Weather in Paris15 °C, sunny",
        "city": "Paris",
        # ui.css, bundled into entrypoint.css and loaded by the <link> tag in the shadow root.
        "border": "rgb(59, 130, 246)",
        "inShadowRoot": True,
        # Rendered under the AI message it was pushed with (message=... in the graph).
        "underMessage": "Here is the weather in Paris.",
    }
    assert report["first"] == expected
    assert report["afterReload"] == expected
    assert "thread=" in report["url"] and report["urlAfterReload"] == report["url"]
    # The page asked the server for the tags, then loaded the bundle and its styles.
    tags = [r for r in report["requests"] if r["method"] == "POST" and r["path"] == "/ui/agent"]
    assert tags and all('"name":"weather"' in (r["body"] or "") for r in tags)
    loaded = {request.split("/ui/agent/")[-1] for request in report["uiRequests"]}
    assert {"entrypoint.js", "entrypoint.css"} <= loaded
