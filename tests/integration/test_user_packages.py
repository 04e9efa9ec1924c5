"""A user's project whose own package is called `app` is served as the project imports it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from langgraph_sdk import get_client

from tests.support.server import ROOT, ServerProcess

OWN_APP = ROOT / "tests" / "projects" / "own_app" / "langgraph.json"


@pytest.fixture
async def own_app_url(tmp_path: Path) -> AsyncIterator[str]:
    """`runyard dev` serving the sample project with its own `app` package."""
    server = ServerProcess("dev", tmp_path, config=OWN_APP).start()
    try:
        yield server.url
    finally:
        server.stop()


async def test_graph_imports_its_own_app_package_absolutely_and_relatively(
    own_app_url: str,
) -> None:
    client = get_client(url=own_app_url, api_key=None)
    try:
        result = await client.runs.wait(None, "shouter", input={"text": "hello"})
    finally:
        await client.http.client.aclose()
    # `from app.tools import shout` and `from .wording import signature` both resolved, and
    # the graph module is `app.graph` itself, not a copy under another name.
    assert result == {"text": "HELLO! (from app)", "module": "app.graph"}
