"""What the routes open without credentials tell a stranger, and the secrets no answer or log
line may carry.

Reference: langgraph-api 0.16.7 (the official server) leaves `/ok`, `/info`, `/metrics`,
`/docs` and `/openapi.json` outside its auth middleware, and its `/info` names the host's
project and revision ids. Runyard keeps its probes open too, but tells a caller the
authenticate handler refuses only their status, and can put the docs behind auth. With auth
configured, `/metrics` (whose fairness groups name users) needs a token of its own
(tests/integration/test_tenants.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.auth import AUTH_CONFIG
from tests.support.backends import backend_server
from tests.support.databases import create_migrated_database, drop_database
from tests.support.server import ServerProcess, free_port

TOKEN = {"Authorization": "Bearer user-a"}
GUARDED = ("/docs", "/redoc", "/openapi.json")


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def guarded_server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    """A server with the test auth handlers and RUNYARD_AUTH_METRICS_AND_DOCS=true."""
    workdir: Path = tmp_path_factory.mktemp(f"guarded-{request.param}")
    env = {"RUNYARD_AUTH_METRICS_AND_DOCS": "true"}
    with backend_server(request.param, workdir, config=AUTH_CONFIG, env=env) as proc:
        yield proc


async def test_probes_tell_a_stranger_only_their_status(auth_server: ServerProcess) -> None:
    async with httpx.AsyncClient(base_url=auth_server.url, timeout=30) as http:
        for token in ({}, {"Authorization": "Bearer nobody"}):
            info = await http.get("/info", headers=token)
            assert info.status_code == 200, info.text
            assert set(info.json()) == {"version", "flags"}, info.text
            assert "agent" not in info.text
            ready = await http.get("/readyz", headers=token)
            assert ready.status_code == 200, ready.text
            assert ready.json() == {"status": "ok"}
            live = await http.get("/livez", headers=token)
            assert live.json() == {"status": "ok"}
            assert (await http.get("/ok", headers=token)).json() == {"ok": True}
        # A caller the handler accepts sees everything, as before.
        info = (await http.get("/info", headers=TOKEN)).json()
        assert "agent" in info["graphs"]
        assert info["runyard"]["instance_id"]
        ready = (await http.get("/readyz", headers=TOKEN)).json()
        assert ready["database"] == "ok"
        assert (await http.get("/livez", headers=TOKEN)).json()["loops_alive"] is True
        # The docs are open by default; /metrics is closed to every user, this one too.
        for path in GUARDED:
            assert (await http.get(path)).status_code == 200, path
        for token in ({}, TOKEN):
            closed = await http.get("/metrics", headers=token)
            assert closed.status_code == 403, closed.text
            assert "RUNYARD_METRICS_TOKEN" in closed.json()["detail"]


async def test_docs_behind_auth_when_asked(guarded_server: ServerProcess) -> None:
    async with httpx.AsyncClient(base_url=guarded_server.url, timeout=30) as http:
        for path in GUARDED:
            refused = await http.get(path)
            assert refused.status_code == 401, (path, refused.text)
            assert refused.headers["content-type"].startswith("application/json")
            assert (await http.get(path, headers=TOKEN)).status_code == 200, path
        spec = (await http.get("/openapi.json", headers=TOKEN)).json()
        assert "/threads" in spec["paths"]
        docs = (await http.get("/docs", headers=TOKEN)).text
        assert "/openapi.json" in docs
        assert (await http.get("/docs/assets/swagger-ui.css")).status_code == 200
        for path in ("/ok", "/health", "/livez", "/readyz", "/info"):
            assert (await http.get(path)).status_code == 200, path
        # The authenticate handler's users are tenants, not operators: /metrics stays closed.
        assert (await http.get("/metrics", headers=TOKEN)).status_code == 403


async def test_more_than_one_authorization_header_is_refused(auth_server: ServerProcess) -> None:
    async with httpx.AsyncClient(base_url=auth_server.url, timeout=30) as http:
        twice = [("Authorization", "Bearer user-a"), ("Authorization", "Bearer user-b")]
        for path in ("/threads/search", "/store/namespaces"):
            response = await http.post(path, json={}, headers=twice)
            assert response.status_code == 400, response.text
            assert "Authorization" in response.json()["detail"]
        once = await http.post("/threads/search", json={}, headers=TOKEN)
        assert once.status_code == 200, once.text


def test_the_redis_password_is_in_no_log_line_and_no_answer(tmp_path: Path) -> None:
    secret = "s3cret-redis-pw"
    url = create_migrated_database()
    redis_url = f"redis://:{secret}@127.0.0.1:{free_port()}/10"  # nothing listens there
    proc = ServerProcess("serve", tmp_path, env={"DATABASE_URL": url, "REDIS_URL": redis_url})
    try:
        proc.start()
        with httpx.Client(base_url=proc.url, timeout=30) as http:
            ready = http.get("/readyz")
            assert ready.status_code == 503, ready.text
            assert ready.json()["redis"].startswith("unreachable"), ready.text
            assert secret not in ready.text
    finally:
        proc.stop()
        drop_database(url)
    log = proc.log_path.read_text()
    assert "notifications_not_connected_at_start" in log
    assert "redis://:***@127.0.0.1" in log
    assert secret not in log
