"""The operator console's API and who may open it: open under `runyard dev` to this machine;
under `runyard serve` behind RUNYARD_CONSOLE_TOKEN or an operator of the auth handler (a
tenant user is refused), and not served at all without either. Its views follow a real run,
and its actions go through the API's own paths."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from tests.support.auth import AUTH_CONFIG
from tests.support.backends import backend_server
from tests.support.server import ServerProcess

TOKEN = "console-token-for-tests-0123456789"
pytestmark = pytest.mark.timeout(180)


def until(what: str, check: Callable[[], Any], seconds: float = 30.0) -> Any:
    """Poll `check` until it returns something truthy; fail naming `what`."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.2)
    pytest.fail(f"timed out waiting for {what}")


@pytest.fixture(scope="module")
def dev(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with backend_server("sqlite", tmp_path_factory.mktemp("console-dev")) as proc:
        yield proc


@pytest.fixture
def http(dev: ServerProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=dev.url, timeout=30) as client:
        yield client


def test_dev_console_is_open_on_loopback_and_follows_a_run(
    dev: ServerProcess, http: httpx.Client
) -> None:
    page = http.get("/console")
    assert page.status_code == 200 and "console/assets/console.js" in page.text
    assert "connect-src 'self'" in page.headers["content-security-policy"]
    assert http.get("/console/assets/console.js").status_code == 200
    assert "/console/api/snapshot" in http.get("/openapi.json").json()["paths"]

    fleet = http.get("/console/api/fleet").json()
    me = next(i for i in fleet if i["serving"])
    assert me["alive"] and not me["draining"] and me["slots"] >= 1

    thread = http.post("/threads", json={}).json()["thread_id"]
    run = http.post(
        f"/threads/{thread}/runs", json={"assistant_id": "slow", "input": {"seconds": 5}}
    ).json()

    def running() -> dict[str, Any] | None:
        rows = http.get("/console/api/runs").json()
        return next((r for r in rows if r["run_id"] == run["run_id"]), None)

    seen = until("the run to show running", running)
    assert seen["owner"] == me["instance_id"] and seen["attempt"] == 1
    assert seen["thread_id"] == thread and seen["lease_expires_at"] is not None
    found = http.get("/console/api/runs/search", params={"q": thread}).json()["runs"]
    assert [r["run_id"] for r in found] == [run["run_id"]]

    done = http.post(f"/console/api/runs/{run['run_id']}/cancel", json={"action": "interrupt"})
    assert done.status_code == 200, done.text
    assert done.json()["by"] == "dev@loopback"
    until(
        "the cancelled run to end interrupted",
        lambda: (
            http.get(f"/threads/{thread}/runs/{run['run_id']}").json()["status"] == "interrupted"
        ),
    )
    assert "console_action action=cancel_interrupt" in dev.log_path.read_text()
    again = http.post(f"/console/api/runs/{run['run_id']}/cancel", json={})
    assert again.status_code == 409

    assert http.post("/console/api/webhooks/nope/retry").status_code == 409
    assert http.post("/console/api/instances/nope/drain").status_code == 404
    assert http.get("/console/api/runs/search", params={"q": ""}).status_code == 422


def test_dev_drain_from_the_console_stops_claiming(http: httpx.Client) -> None:
    me = next(i for i in http.get("/console/api/fleet").json() if i["serving"])
    answer = http.post(f"/console/api/instances/{me['instance_id']}/drain")
    assert answer.status_code == 200, answer.text

    def draining() -> bool:
        fleet = http.get("/console/api/fleet").json()
        return any(i["serving"] and i["draining"] for i in fleet)

    until("the instance to drain", draining)
    assert http.get("/readyz").status_code == 503


def test_serve_without_a_credential_has_no_console(tmp_path: Path) -> None:
    with backend_server("postgres", tmp_path) as proc:
        for path in ("/console", "/console/api/snapshot", "/console/api/live"):
            assert httpx.get(proc.url + path, timeout=10).status_code == 404, path
        log = proc.log_path.read_text()
    assert "console_off" in log and "RUNYARD_CONSOLE_TOKEN" in log


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    env = {"RUNYARD_CONSOLE_TOKEN": TOKEN, "RUNYARD_CONSOLE_OPERATORS": "true"}
    workdir = tmp_path_factory.mktemp("console-serve")
    with backend_server("postgres", workdir, config=AUTH_CONFIG, env=env) as proc:
        yield proc


@pytest.mark.parametrize(
    ("authorization", "status"),
    [
        (None, 401),
        ("Bearer not-the-console-token", 401),
        ("Basic " + TOKEN, 401),
        # A tenant of the API is no operator.
        ("Bearer user-a", 403),
        ("Bearer operator", 200),
        ("Bearer " + TOKEN, 200),
    ],
)
def test_serve_console_needs_an_operator(
    guarded: ServerProcess, authorization: str | None, status: int
) -> None:
    headers = {"Authorization": authorization} if authorization else {}
    for path in ("/console/api/snapshot", "/console/api/fleet"):
        answer = httpx.get(guarded.url + path, headers=headers, timeout=10)
        assert answer.status_code == status, (path, answer.text)
    with httpx.stream("GET", guarded.url + "/console/api/live", headers=headers) as live:
        assert live.status_code == status
        if status == 200:
            first = next(live.iter_lines())
            assert first == "event: snapshot"
    refused = httpx.post(guarded.url + "/console/api/instances/x/drain", headers=headers)
    assert refused.status_code == (404 if status == 200 else status)
    # The page itself holds no data: it asks the operator for the credential.
    assert httpx.get(guarded.url + "/console", timeout=10).status_code == 200


def test_serve_retries_a_failed_webhook_delivery(guarded: ServerProcess) -> None:
    operator = {"Authorization": "Bearer " + TOKEN}
    url = guarded.env["DATABASE_URL"]
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO webhook_deliveries (delivery_id, run_id, url, payload, status,"
            " attempts, last_error) VALUES ('d-1', 'r-1', 'http://127.0.0.1:9/hook?token=s3cret',"
            " '{}', 'failed', 3, 'HTTP 500')"
        )

    def listed() -> dict[str, Any] | None:
        rows = httpx.get(guarded.url + "/console/api/webhooks", headers=operator).json()
        return next((d for d in rows if d["delivery_id"] == "d-1"), None)

    seen = until("the failed delivery to be listed", listed)
    assert seen["status"] == "failed" and seen["attempts"] == 3
    assert seen["last_answer"] == "HTTP 500" and "s3cret" not in seen["url"]
    retried = httpx.post(guarded.url + "/console/api/webhooks/d-1/retry", headers=operator)
    assert retried.status_code == 200 and retried.json()["by"] == "console-token"
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT status, attempts FROM webhook_deliveries WHERE delivery_id = 'd-1'"
        ).fetchone()
    # Pending again (or attempted since, and refused or waiting for its next attempt).
    assert row is not None and row[0] != "failed" and row[1] <= 1
    again = httpx.post(guarded.url + "/console/api/webhooks/d-1/retry", headers=operator)
    assert again.status_code == 409
