"""The generative UI page (examples/web, genui.html) in headless Chromium: `useStream` from
@langchain/langgraph-sdk/react and `LoadExternalComponent` against the genui test project
(tests/projects/genui), on `runyard dev`, and on two `runyard serve` instances sharing
PostgreSQL and Redis where the page talks to instance B (no worker) and the runs execute on A.
Every server builds the UI as it starts.

The page asks for the weather; the graph pushes a `weather` component with
`push_ui_message`; the page asks POST /ui/agent for its tags, loads the bundle built from
ui.tsx into a shadow root and renders the component with the pushed props. After a reload
the thread's `ui` values render it again. The page's origin forwards GET /ui/ to the server
(serve.mjs --api), as the tags name the assets by path.
"""

from __future__ import annotations

import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.browser.pages import OUTPUT, WEB, drive, node
from tests.support.databases import fresh_database
from tests.support.redis_keys import delete_keys
from tests.support.server import ROOT, ServerProcess, free_port

REDIS_URL = "redis://127.0.0.1:6379/0"
GENUI = ROOT / "tests" / "projects" / "genui" / "langgraph.json"
pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


@pytest.fixture(scope="module", params=["dev", "two-instances"])
def api_url(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """`runyard dev` on the genui project, or instance B of two `runyard serve`."""
    workdir = tmp_path_factory.mktemp(f"genui-{request.param}")
    if request.param == "dev":
        dev = ServerProcess("dev", workdir, config=GENUI).start(timeout=180)
        try:
            yield dev.url
        finally:
            dev.stop()
        return
    prefix = f"genui-{uuid.uuid4().hex[:8]}:"
    env = {"REDIS_URL": REDIS_URL, "RUNYARD_REDIS_PREFIX": prefix}
    with fresh_database() as url:
        env["DATABASE_URL"] = url
        a = ServerProcess("serve", workdir / "a", env=env, config=GENUI)
        b = ServerProcess("serve", workdir / "b", env={**env, "WORKER_COUNT": "0"}, config=GENUI)
        try:
            a.start(timeout=180)
            b.start(timeout=180)
            # Each instance built its own copy: the same bytes, so the same ETag on both.
            etags = {httpx.get(f"{s.url}/ui/agent/entrypoint.js").headers["etag"] for s in (a, b)}
            assert len(etags) == 1, etags
            yield b.url
        finally:
            b.stop()
            a.stop()
            delete_keys(REDIS_URL, prefix)


@pytest.fixture(scope="module")
def built_pages() -> None:
    """The pages, built once for the module from their current source."""
    build = subprocess.run(
        [node(), "build.mjs"], cwd=WEB, capture_output=True, text=True, timeout=120
    )
    assert build.returncode == 0, f"building the pages failed:\n{build.stdout}{build.stderr}"


def serve_pages(tmp_path: Path, api_url: str) -> tuple[subprocess.Popen[bytes], str]:
    """The built pages on their own origin, forwarding /ui/ to `api_url`."""
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


@pytest.mark.usefixtures("built_pages")
def test_pushed_component_renders_live_and_after_reload(tmp_path: Path, api_url: str) -> None:
    page, page_url = serve_pages(tmp_path, api_url)
    try:
        report = drive(
            "genui_page.mjs",
            OUTPUT / "genui-page.png",
            {"pageUrl": page_url, "apiUrl": api_url, "ask": "weather in Paris"},
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
