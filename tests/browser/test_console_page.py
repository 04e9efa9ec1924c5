"""The operator console in headless Chromium against two `runyard serve` instances on
PostgreSQL and Redis, with the default timings: console_page.mjs drives the page, and the
test checks what the servers recorded. The docs show a copy of its screenshot
(docs/console.png)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.browser.pages import OUTPUT, drive
from tests.support.redis_keys import postgres_and_redis
from tests.support.server import ServerProcess, start_together

SCREENSHOT = OUTPUT / "console-page.png"
TOKEN = "console-token-for-the-browser-test"
pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]


@pytest.fixture
def fleet(tmp_path: Path) -> Iterator[list[ServerProcess]]:
    with postgres_and_redis("runyard_console") as env:
        servers = [
            ServerProcess("serve", tmp_path / f"i{n}", env={**env, "RUNYARD_CONSOLE_TOKEN": TOKEN})
            for n in range(2)
        ]
        start_together(servers)
        try:
            yield servers
        finally:
            for server in servers:
                server.stop()


def status_of(base: str, run: dict[str, str]) -> str:
    path = f"/threads/{run['thread_id']}/runs/{run['run_id']}"
    return str(httpx.get(base + path, timeout=10).json()["status"])


def test_console_shows_the_fleet_live_cancels_and_sees_a_kill(
    fleet: list[ServerProcess],
) -> None:
    assert all(s.process is not None for s in fleet)
    servers = [{"url": s.url, "pid": s.process.pid} for s in fleet if s.process is not None]
    report = drive("console_page.mjs", SCREENSHOT, {"servers": servers, "token": TOKEN})

    assert "RUNYARD_CONSOLE_TOKEN" in report["askedForToken"]
    assert sorted(int(i.split(":")[1]) for i in report["fleet"]) == sorted(
        s["pid"] for s in servers
    )
    survivor = report["survivor"]
    assert status_of(survivor, report["quick"]) == "success"
    assert report["quickOwner"] in report["fleet"]
    assert status_of(survivor, report["cancelled"]) == "interrupted"
    assert report["resumedOn"] != report["killed"] and report["resumedOn"] in report["fleet"]
    assert status_of(survivor, report["victim"]) == "success"
    assert report["outside"] == []
    assert report["consoleErrors"] == [] or all("401" in e for e in report["consoleErrors"])
    # Without the credential, the API refuses.
    assert httpx.get(survivor + "/console/api/snapshot", timeout=10).status_code == 401
