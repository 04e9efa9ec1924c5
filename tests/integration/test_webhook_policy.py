"""Webhook URLs the server may not call are refused at creation, on every route that takes
one, with a 422 naming the rule; LangGraph's `webhooks` section works as on the official
server; deliveries are signed. `runyard dev` on SQLite and `runyard serve` on PostgreSQL.

Compared against langgraph-api 0.16.7 (`langgraph_api/webhook.py`, `config/schemas.py`):
the same defaults (`disable_loopback` true, https required once `url` is written), the same
message openings (`Webhook host blocked: loopback IP range`, `Webhook domain not allowed`),
header templates `${{ env.VAR }}` under `env_prefix`, hosts listed in `allowed_domains`
trusted. Runyard refuses private addresses by default too, and lets `runyard dev` call
loopback unless `disable_loopback` is written.
"""

from __future__ import annotations

import base64
import ipaddress
import json
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.backends import backend_server
from tests.support.server import ROOT, ServerProcess
from tests.support.webhooks import SignatureError, WebhookReceiver, verify_signature

SECRET = "whsec_" + base64.b64encode(b"runyard-test-signing-key-32bytes").decode()
GRAPHS = ROOT / "tests" / "graphs"
INTERNAL_LOOPBACK = [
    "http://127.0.0.1:6379/",
    "http://localhost:5432/",
    "http://2130706433/",
    "http://0177.0.0.1/",
    "http://0x7f000001/",
    "http://[::1]/",
    "http://[::ffff:127.0.0.1]/",
    "http://[::ffff:0:7f00:1]/",
]
INTERNAL_ALWAYS = {
    "http://0.0.0.0:8123/threads": "unspecified IP range",
    "http://169.254.169.254/latest/meta-data/": "cloud metadata endpoint",
    "http://169.254.10.10/": "link-local IP range",
    "http://[fe80::1]/": "link-local IP range",
    "http://10.0.0.7/": "private IP range",
    "http://192.168.1.1/": "private IP range",
    "http://[fd00::1]/": "private IP range",
    "http://[::ffff:10.0.0.1]/": "private IP range",
}
MALFORMED = {
    "http://127.0.0.1:9340/a\r\nX-Injected: 1": "Invalid webhook URL",
    "http:///nohost": "Invalid webhook hostname",
    "http://hooks.example.com/" + "a" * 5000: "Webhook URL too long",
}


def write_config(folder: Path, webhooks: dict[str, Any] | None) -> Path:
    """A langgraph.json serving the test graphs, with this `webhooks` section."""
    config: dict[str, Any] = {
        "dependencies": [str(GRAPHS)],
        "graphs": {
            "pipeline": str(ROOT / "examples" / "pipeline.py") + ":graph",
            "fail": str(GRAPHS / "behaviors.py") + ":fail",
        },
    }
    if webhooks is not None:
        config["webhooks"] = webhooks
    path = folder / "langgraph.json"
    path.write_text(json.dumps(config))
    return path


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def default_server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    """A server whose langgraph.json has no `webhooks` section: the defaults."""
    workdir = tmp_path_factory.mktemp(f"webhooks-default-{request.param}")
    with backend_server(request.param, workdir, write_config(workdir, None)) as proc:
        yield proc


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def official_server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    """A server configured as a LangGraph deployment would be: allowed domains, templated
    headers, and a signing secret."""
    workdir = tmp_path_factory.mktemp(f"webhooks-official-{request.param}")
    webhooks = {
        "url": {"allowed_domains": ["127.0.0.1", "*.example.com"], "require_https": False},
        "headers": {
            "X-Team": "${{ env.LG_WEBHOOK_TEAM }}",
            "Authorization": "Bearer ${{ env.LG_WEBHOOK_TOKEN }}",
        },
    }
    env = {
        "LG_WEBHOOK_TEAM": "blue",
        "LG_WEBHOOK_TOKEN": "t0ken",
        "RUNYARD_WEBHOOK_SECRET": SECRET,
        "RUNYARD_WEBHOOK_MAX_ATTEMPTS": "3",
    }
    config = write_config(workdir, webhooks)
    with backend_server(request.param, workdir, config, env=env) as proc:
        yield proc


async def refused(http: httpx.AsyncClient, path: str, body: Any, method: str = "POST") -> str:
    """POST (or PATCH) `body` to `path`, expect a 422, and return its detail."""
    response = await http.request(method, path, json=body)
    assert response.status_code == 422, (path, body, response.text)
    return str(response.json()["detail"])


async def thread(http: httpx.AsyncClient) -> str:
    """A new thread's id."""
    response = await http.post("/threads", json={})
    response.raise_for_status()
    return str(response.json()["thread_id"])


async def run_count(http: httpx.AsyncClient, thread_id: str) -> int:
    """How many runs the thread has."""
    response = await http.get(f"/threads/{thread_id}/runs")
    response.raise_for_status()
    return len(response.json())


async def test_internal_addresses_are_refused_at_creation(default_server: ServerProcess) -> None:
    """The issue's addresses (Redis, PostgreSQL, the server itself, metadata, private)."""
    blocked = dict(INTERNAL_ALWAYS)
    if default_server.mode == "serve":
        blocked.update({url: "" for url in INTERNAL_LOOPBACK})
    async with httpx.AsyncClient(base_url=default_server.url, timeout=30) as http:
        thread_id = await thread(http)
        for url, reason in blocked.items():
            body = {"assistant_id": "pipeline", "input": {"text": "a"}, "webhook": url}
            detail = await refused(http, f"/threads/{thread_id}/runs/wait", body)
            assert detail.startswith(f"Webhook host blocked: {reason}"), (url, detail)
            assert "webhooks.url.disable" in detail or "no policy allows" in detail
        assert await run_count(http, thread_id) == 0


async def test_serve_refuses_loopback_naming_the_rule(default_server: ServerProcess) -> None:
    if default_server.mode != "serve":
        pytest.skip("`runyard dev` allows loopback by default (see the next test)")
    async with httpx.AsyncClient(base_url=default_server.url, timeout=30) as http:
        body = {"assistant_id": "pipeline", "webhook": f"{default_server.url}/threads"}
        detail = await refused(http, "/runs/wait", body)
    assert detail.startswith("Webhook host blocked: loopback IP range (127.0.0.1)")
    assert "set webhooks.url.disable_loopback to false in langgraph.json" in detail


async def test_a_name_that_resolves_to_loopback_is_refused(default_server: ServerProcess) -> None:
    """Not only `localhost`: any name is resolved, and every address it gives is checked."""
    name = socket.gethostname()
    try:
        addresses = {info[4][0] for info in socket.getaddrinfo(name, 80)}
    except OSError:
        addresses = set()
    if (
        default_server.mode != "serve"
        or not addresses
        or not all(ipaddress.ip_address(a).is_loopback for a in addresses)
    ):
        pytest.skip("needs `runyard serve` and a host name that resolves only to loopback")
    async with httpx.AsyncClient(base_url=default_server.url, timeout=30) as http:
        body = {"assistant_id": "pipeline", "webhook": f"http://{name}:{default_server.port}/"}
        detail = await refused(http, "/runs", body)
    assert detail.startswith("Webhook host blocked: loopback IP range"), detail


async def test_dev_allows_loopback_and_says_so_once(
    default_server: ServerProcess, receiver: WebhookReceiver
) -> None:
    if default_server.mode != "dev":
        pytest.skip("only `runyard dev` allows loopback by default")
    assert default_server.log_path.read_text().count("webhook_loopback_allowed") == 1
    async with httpx.AsyncClient(base_url=default_server.url, timeout=30) as http:
        body = {"assistant_id": "pipeline", "input": {"text": "a"}, "webhook": receiver.url}
        run = (await http.post("/runs", json=body)).json()
    await receiver.wait_for(run["run_id"])


async def test_serve_on_the_embedded_store_refuses_loopback_too(
    tmp_path: Path, receiver: WebhookReceiver
) -> None:
    """`dev` is the only mode with developer defaults: `serve --sqlite` is production on one
    file, and refuses webhooks to loopback (the server itself, Redis, PostgreSQL) and
    private-network preflights as `serve` on PostgreSQL does."""
    env = {"RUNYARD_SQLITE": "true", "DATABASE_URL": "", "REDIS_URL": ""}
    server = ServerProcess("serve", tmp_path, env=env, config=write_config(tmp_path, None))
    server.start()
    try:
        async with httpx.AsyncClient(base_url=server.url, timeout=30) as http:
            for url in (receiver.url, f"{server.url}/threads", "http://127.0.0.1:6379/"):
                body = {"assistant_id": "pipeline", "input": {"text": "a"}, "webhook": url}
                detail = await refused(http, "/runs/wait", body)
                assert detail.startswith("Webhook host blocked: loopback IP range"), detail
            preflight = await http.options(
                "/threads",
                headers={
                    "Origin": "https://public.example",
                    "Access-Control-Request-Method": "POST",
                    "Access-Control-Request-Private-Network": "true",
                },
            )
            assert "access-control-allow-private-network" not in preflight.headers
    finally:
        server.stop()
    assert receiver.requests == []
    assert "webhook_loopback_allowed" not in server.log_path.read_text()


async def test_every_route_that_takes_a_webhook_checks_it(default_server: ServerProcess) -> None:
    url = "http://169.254.169.254/latest/meta-data/"
    run = {"assistant_id": "pipeline", "input": {"text": "a"}, "webhook": url}
    cron = {**run, "schedule": "*/5 * * * *"}
    async with httpx.AsyncClient(base_url=default_server.url, timeout=30) as http:
        thread_id = await thread(http)
        for path in ("/runs", "/runs/wait", "/runs/stream"):
            assert "cloud metadata" in await refused(http, f"/threads/{thread_id}{path}", run)
            assert "cloud metadata" in await refused(http, path, run)
        detail = await refused(http, "/runs/batch", [{"assistant_id": "pipeline"}, run])
        assert detail.startswith("batch payload 1: Webhook host blocked: cloud metadata")
        assert "cloud metadata" in await refused(http, f"/threads/{thread_id}/runs/crons", cron)
        assert "cloud metadata" in await refused(http, "/runs/crons", cron)
        fine = {k: v for k, v in cron.items() if k != "webhook"}
        created = await http.post("/runs/crons", json=fine)
        created.raise_for_status()
        cron_path = f"/runs/crons/{created.json()['cron_id']}"
        assert "cloud metadata" in await refused(http, cron_path, {"webhook": url}, "PATCH")
        assert await run_count(http, thread_id) == 0
        search = await http.post("/runs/crons/search", json={"limit": 100})
        assert all(c["payload"].get("webhook") is None for c in search.json())


async def test_malformed_urls_are_422_and_leave_no_task_error(
    default_server: ServerProcess,
) -> None:
    async with httpx.AsyncClient(base_url=default_server.url, timeout=30) as http:
        thread_id = await thread(http)
        for url, opening in MALFORMED.items():
            body = {"assistant_id": "pipeline", "input": {"text": "a"}, "webhook": url}
            detail = await refused(http, f"/threads/{thread_id}/runs", body)
            assert detail.startswith(opening), (url, detail)
        assert await run_count(http, thread_id) == 0
    log = default_server.log_path.read_text()
    assert "Task exception was never retrieved" not in log
    assert "InvalidURL" not in log


async def test_allowed_domains_and_headers_as_on_the_official_server(
    official_server: ServerProcess, receiver: WebhookReceiver
) -> None:
    async with httpx.AsyncClient(base_url=official_server.url, timeout=30) as http:
        port = receiver.url.rsplit(":", 1)[1]
        for url in (
            f"http://localhost:{port}/hook",  # loopback, and not listed
            "http://example.com/hook",  # `*.example.com` is subdomains only
            "http://hooks.example.com.evil.net/hook",
            "http://93.184.216.34/hook",
        ):
            body = {"assistant_id": "pipeline", "webhook": url}
            detail = await refused(http, "/runs", body)
            assert detail.startswith("Webhook domain not allowed"), (url, detail)
            assert "webhooks.url.allowed_domains" in detail
        # Listed: trusted, loopback though it is (the official server does the same).
        body = {"assistant_id": "pipeline", "input": {"text": "a"}, "webhook": receiver.url}
        run = (await http.post("/runs", json=body)).json()
    await receiver.wait_for(run["run_id"])
    (_path, headers, _raw) = receiver.requests[-1]
    assert headers["x-team"] == "blue"
    assert headers["authorization"] == "Bearer t0ken"


async def test_a_receiver_verifies_the_signature_and_rejects_tampering(
    official_server: ServerProcess, receiver: WebhookReceiver
) -> None:
    async with httpx.AsyncClient(base_url=official_server.url, timeout=30) as http:
        body = {"assistant_id": "pipeline", "input": {"text": "a"}, "webhook": receiver.url}
        run = (await http.post("/runs", json=body)).json()
    await receiver.wait_for(run["run_id"])
    (_path, headers, raw) = receiver.requests[-1]
    assert headers["webhook-id"] and headers["webhook-signature"].startswith("v1,")
    assert abs(int(headers["webhook-timestamp"]) - time.time()) < 60
    verify_signature(SECRET, headers, raw)
    with pytest.raises(SignatureError, match="no matching signature"):
        verify_signature(SECRET, headers, raw.replace(b'"success"', b'"error"'))
    with pytest.raises(SignatureError, match="no matching signature"):
        other = "whsec_" + base64.b64encode(os.urandom(32)).decode()
        verify_signature(other, headers, raw)
    stale = {**headers, "webhook-timestamp": str(int(time.time()) - 3600)}
    with pytest.raises(SignatureError, match="timestamp"):
        verify_signature(SECRET, stale, raw)


async def test_retries_keep_the_webhook_id(
    official_server: ServerProcess, receiver: WebhookReceiver
) -> None:
    receiver.failures = 2
    async with httpx.AsyncClient(base_url=official_server.url, timeout=30) as http:
        body = {"assistant_id": "pipeline", "input": {"text": "a"}, "webhook": receiver.url}
        run = (await http.post("/runs", json=body)).json()
    await receiver.wait_for(run["run_id"])
    ids = [headers["webhook-id"] for (_p, headers, _raw) in receiver.requests]
    assert len(ids) == 3 and len(set(ids)) == 1
    for _p, headers, raw in receiver.requests:
        verify_signature(SECRET, headers, raw)
