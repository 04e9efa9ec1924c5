"""A server with the test auth handlers (tests/graphs/auth.py) and clients of two users.

Registered as a plugin in tests/conftest.py: `auth_server` (one per backend, per module) and
`users` (clients for user-a and user-b) serve every test module of those handlers.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from langgraph_sdk import get_client

from tests.support.backends import backend_server
from tests.support.server import ROOT, ServerProcess

AUTH_CONFIG = ROOT / "tests" / "graphs" / "langgraph_auth.json"
Sdk = Any


def sdk_for(server: ServerProcess, token: str) -> Sdk:
    """A langgraph-sdk client that sends `Authorization: Bearer <token>`."""
    return get_client(url=server.url, api_key=None, headers={"Authorization": f"Bearer {token}"})


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def auth_server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    """A server whose langgraph.json declares the test auth handlers."""
    workdir: Path = tmp_path_factory.mktemp(f"auth-{request.param}")
    with backend_server(request.param, workdir, config=AUTH_CONFIG) as proc:
        yield proc


@pytest.fixture
async def users(auth_server: ServerProcess) -> AsyncIterator[tuple[Sdk, Sdk]]:
    """Clients for user-a and user-b."""
    a, b = sdk_for(auth_server, "user-a"), sdk_for(auth_server, "user-b")
    try:
        yield a, b
    finally:
        await a.http.client.aclose()
        await b.http.client.aclose()
