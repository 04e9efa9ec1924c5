"""CORS as LangGraph's server gives it: every origin by default, `http.cors`, CORS_ALLOW_ORIGINS.

Compared against `langgraph dev` (langgraph-api 0.16.7) run side by side: its preflight
answers 200 with the request's method and headers allowed and `*` as the origin, and its
answers expose x-pagination-total, x-pagination-next and content-location (Runyard adds
location, where the JS SDK reconnects a stream). Its private-network preflight carries
Access-Control-Allow-Private-Network but answers 400, which Chrome refuses; Runyard's dev mode
answers it 200. The `http.cors` semantics follow langgraph_api/config (CORS_ALLOW_ORIGINS
fills in allow_origins when the file gives none).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.server import ROOT, ServerProcess

PAGE_ORIGIN = "http://localhost:3000"
EXPOSED = {"x-pagination-total", "x-pagination-next", "content-location", "location"}


def preflight(base_url: str, origin: str = PAGE_ORIGIN, **extra: str) -> httpx.Response:
    """What a browser sends before a cross-origin JSON POST to /threads."""
    headers = {
        "Origin": origin,
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "content-type,x-api-key",
        **extra,
    }
    return httpx.options(f"{base_url}/threads", headers=headers, timeout=30)


def listed(value: str | None) -> set[str]:
    """The lower-cased items of a comma-separated header."""
    return {item.strip().lower() for item in (value or "").split(",") if item.strip()}


def project_config(tmp_path: Path, http: dict[str, Any] | None) -> Path:
    """A langgraph.json serving the example chat graph, with this `http` section."""
    config: dict[str, Any] = {"graphs": {"agent": str(ROOT / "examples" / "chat.py") + ":graph"}}
    if http is not None:
        config["http"] = http
    path = tmp_path / "langgraph.json"
    path.write_text(json.dumps(config))
    return path


@pytest.fixture
def started(tmp_path: Path) -> Iterator[list[ServerProcess]]:
    """Servers started by a test, stopped after it."""
    servers: list[ServerProcess] = []
    yield servers
    for server in servers:
        server.stop()


def test_preflight_allows_any_origin_method_and_header(base_url: str) -> None:
    response = preflight(base_url)
    assert response.status_code == 200, response.text
    assert response.headers["access-control-allow-origin"] == "*"
    assert "POST" in response.headers["access-control-allow-methods"]
    assert listed(response.headers["access-control-allow-headers"]) >= {
        "content-type",
        "x-api-key",
    }
    # A wildcard origin never comes with credentials.
    assert "access-control-allow-credentials" not in response.headers


def test_answers_expose_the_headers_the_sdk_reads(base_url: str) -> None:
    origin = {"Origin": PAGE_ORIGIN}
    created = httpx.post(f"{base_url}/threads", json={}, headers=origin, timeout=30)
    assert created.status_code == 200, created.text
    assert created.headers["access-control-allow-origin"] == "*"
    assert listed(created.headers["access-control-expose-headers"]) >= EXPOSED
    thread_id = created.json()["thread_id"]
    # The JS SDK learns a streamed run's id from Content-Location: cross-origin it can read
    # it only when it is exposed (useStream's reconnectOnMount depends on it).
    body = {"assistant_id": "agent", "input": {"messages": [{"role": "user", "content": "hi"}]}}
    with httpx.stream(
        "POST", f"{base_url}/threads/{thread_id}/runs/stream", json=body, headers=origin, timeout=60
    ) as stream:
        assert stream.status_code == 200
        assert "/runs/" in stream.headers["content-location"]
        assert "content-location" in listed(stream.headers["access-control-expose-headers"])
        stream.read()
    # Errors are readable too: a browser shows the detail instead of "CORS error".
    missing = httpx.get(f"{base_url}/threads/{thread_id}x", headers=origin, timeout=30)
    assert missing.status_code in (404, 422)
    assert missing.headers["access-control-allow-origin"] == "*"


def test_dev_mode_allows_private_network_preflights(server: ServerProcess) -> None:
    response = preflight(server.url, **{"Access-Control-Request-Private-Network": "true"})
    allowed = response.headers.get("access-control-allow-private-network")
    # As `langgraph dev` does; production leaves it to ALLOW_PRIVATE_NETWORK.
    if server.mode == "dev":
        assert response.status_code == 200 and allowed == "true"
    else:
        assert response.status_code == 400 and allowed is None
        assert "private-network" in response.text


def test_cors_allow_origins_lists_the_allowed_origins(
    tmp_path: Path, started: list[ServerProcess]
) -> None:
    env = {"CORS_ALLOW_ORIGINS": "http://a.example, http://b.example"}
    server = ServerProcess("dev", tmp_path, env=env, config=project_config(tmp_path, None))
    started.append(server.start())
    allowed = preflight(server.url, origin="http://b.example")
    assert allowed.status_code == 200
    assert allowed.headers["access-control-allow-origin"] == "http://b.example"
    # Listed origins may send credentials (cookies, Authorization) as LangGraph allows.
    assert allowed.headers["access-control-allow-credentials"] == "true"
    refused = preflight(server.url, origin=PAGE_ORIGIN)
    assert refused.status_code == 400
    assert "access-control-allow-origin" not in refused.headers
    plain = httpx.get(f"{server.url}/ok", headers={"Origin": PAGE_ORIGIN}, timeout=30)
    assert plain.status_code == 200 and "access-control-allow-origin" not in plain.headers


def test_http_cors_in_langgraph_json_restricts_origins(
    tmp_path: Path, started: list[ServerProcess]
) -> None:
    http = {
        "cors": {
            "allow_origins": ["https://chat.example"],
            "allow_methods": ["GET", "POST"],
            "expose_headers": ["x-custom"],
            "max_age": 60,
        }
    }
    # The file's allow_origins take precedence over the environment variable.
    env = {"CORS_ALLOW_ORIGINS": PAGE_ORIGIN}
    server = ServerProcess("dev", tmp_path, env=env, config=project_config(tmp_path, http))
    started.append(server.start())
    allowed = preflight(server.url, origin="https://chat.example")
    assert allowed.status_code == 200, allowed.text
    assert allowed.headers["access-control-allow-origin"] == "https://chat.example"
    assert listed(allowed.headers["access-control-allow-methods"]) == {"get", "post"}
    assert allowed.headers["access-control-max-age"] == "60"
    assert preflight(server.url, origin=PAGE_ORIGIN).status_code == 400
    delete = httpx.options(
        f"{server.url}/threads/x",
        headers={"Origin": "https://chat.example", "Access-Control-Request-Method": "DELETE"},
        timeout=30,
    )
    assert delete.status_code == 400
    answer = httpx.post(
        f"{server.url}/threads", json={}, headers={"Origin": "https://chat.example"}, timeout=30
    )
    assert answer.headers["access-control-allow-origin"] == "https://chat.example"
    assert listed(answer.headers["access-control-expose-headers"]) == {"x-custom"}


def test_a_bad_http_cors_section_stops_start_up_with_the_key_named(tmp_path: Path) -> None:
    http = {"cors": {"allow_origin": ["https://chat.example"]}}
    server = ServerProcess("dev", tmp_path, config=project_config(tmp_path, http))
    with pytest.raises(RuntimeError) as failed:
        server.start()
    assert "http.cors.allow_origin is not supported by Runyard" in str(failed.value)
