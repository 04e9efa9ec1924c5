"""Fixtures: a real Runyard server per storage backend and a langgraph-sdk client for it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from langgraph_sdk import get_client
from langgraph_sdk.client import LangGraphClient

from tests.support.backends import backend_server
from tests.support.server import ServerProcess

BACKENDS = ["sqlite", "postgres"]
# Fixtures shared by several test folders (`receiver`: a webhook receiver; `auth_server` and
# `users`: a server with the test auth handlers and clients of two users).
pytest_plugins = ["tests.support.webhooks", "tests.support.auth"]


@pytest.fixture(scope="session", params=BACKENDS)
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    """A running server: `runyard dev` on SQLite, or `runyard serve` on a fresh PostgreSQL db."""
    workdir = tmp_path_factory.mktemp(f"server-{request.param}")
    with backend_server(request.param, workdir) as proc:
        yield proc


@pytest.fixture
async def client(server: ServerProcess) -> AsyncIterator[LangGraphClient]:
    """A langgraph-sdk client talking to the server over HTTP."""
    lg = get_client(url=server.url, api_key=None)
    try:
        yield lg
    finally:
        await lg.http.client.aclose()


@pytest.fixture
def base_url(server: ServerProcess) -> str:
    """The server's base URL, for raw HTTP calls."""
    return server.url


@pytest.fixture(scope="session")
def repo_root() -> Path:
    """The repository root."""
    return Path(__file__).resolve().parents[1]
