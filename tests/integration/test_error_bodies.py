"""A request that fails inside the server still answers JSON (`{"detail": ...}`), as every
other error does, and the server goes on serving; the traceback goes to the log.

The official server (`langgraph dev`, langgraph-api 0.16.7, compared side by side) answers
such failures with a plain-text `Internal Server Error`; Runyard's clients parse every error
body as JSON, so Runyard does not.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.server import ServerProcess

pytestmark = pytest.mark.timeout(90)

EMBEDDINGS = Path(__file__).resolve().parents[1] / "graphs" / "embeddings.py"
MEMORY_GRAPH = Path(__file__).resolve().parents[1] / "graphs" / "memory.py"


@pytest.fixture(scope="module")
def broken_embedder(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """`runyard dev` whose store embeds with a function that always fails."""
    workdir = tmp_path_factory.mktemp("broken-embedder")
    config = workdir / "langgraph.json"
    index = {"embed": f"{EMBEDDINGS}:unreachable", "dims": 16, "fields": ["text"]}
    config.write_text(
        json.dumps({"graphs": {"memory": f"{MEMORY_GRAPH}:graph"}, "store": {"index": index}})
    )
    server = ServerProcess("dev", workdir / "server", config=config).start()
    try:
        yield server
    finally:
        server.stop()


def assert_json_server_error(answer: httpx.Response) -> None:
    """A 500 whose body is a JSON error pointing at the server log."""
    assert answer.status_code == 500, answer.text
    assert answer.headers["content-type"] == "application/json", answer.text
    assert "server log" in answer.json()["detail"]


async def test_a_store_put_whose_embedder_fails_answers_a_json_error(
    broken_embedder: ServerProcess,
) -> None:
    async with httpx.AsyncClient(base_url=broken_embedder.url, timeout=30) as http:
        item = {"namespace": ["notes"], "key": "k", "value": {"text": "black tea"}}
        failed = await http.put("/store/items", json=item, headers={"Origin": "http://ui.test"})
        assert_json_server_error(failed)
        assert failed.headers["access-control-allow-origin"] == "*"  # a browser can read it
        # Nothing was half-written, and the server still serves.
        got = await http.get("/store/items", params={"namespace": "notes", "key": "k"})
        assert got.status_code == 200 and got.json() is None
        # An item with nothing to embed does not call the embedder.
        quiet = {"namespace": ["notes"], "key": "q", "value": {"other": 1}}
        assert (await http.put("/store/items", json=quiet)).status_code == 204


async def test_a_semantic_search_whose_embedder_fails_answers_a_json_error(
    broken_embedder: ServerProcess,
) -> None:
    async with httpx.AsyncClient(base_url=broken_embedder.url, timeout=30) as http:
        search = {"namespace_prefix": ["notes"], "query": "tea"}
        assert_json_server_error(await http.post("/store/items/search", json=search))
    log = broken_embedder.log_path.read_text()
    assert "the embedding service refused the connection" in log  # the traceback is logged
