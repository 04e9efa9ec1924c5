"""Input limits: body size, metadata size and content, ids, pages; each a clear 4xx."""

from __future__ import annotations

import asyncio
import json
import random
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.runs import new_tag
from tests.support.server import ServerProcess

DEFAULT_MAX_BODY = 10 * 1024 * 1024
MAX_METADATA = 64 * 1024


@pytest.fixture
async def http(base_url: str) -> AsyncIterator[httpx.AsyncClient]:
    """A raw HTTP client for the server."""
    async with httpx.AsyncClient(base_url=base_url, timeout=60) as client:
        yield client


def detail(response: httpx.Response) -> str:
    """The error's `detail`, which must be a non-empty sentence."""
    body = response.json()
    assert isinstance(body.get("detail"), str) and body["detail"], body
    return str(body["detail"])


def big_metadata(size: int) -> dict[str, Any]:
    """Metadata whose JSON text is about `size` bytes, tagged so searches can find it."""
    return {**new_tag(), "blob": "x" * size}


# --- request body size --------------------------------------------------------------------


async def test_body_over_the_limit_is_413_from_its_declared_length(
    http: httpx.AsyncClient,
) -> None:
    body = json.dumps({"metadata": {"blob": "x" * DEFAULT_MAX_BODY}}).encode()
    response = await http.post(
        "/threads", content=body, headers={"content-type": "application/json"}
    )
    assert response.status_code == 413
    assert "RUNYARD_MAX_BODY_BYTES" in detail(response)


async def test_chunked_body_over_the_limit_is_413_while_reading(http: httpx.AsyncClient) -> None:
    chunk = b"x" * (1024 * 1024)

    async def chunks() -> AsyncIterator[bytes]:
        yield b'{"metadata": {"blob": "'
        for _ in range(DEFAULT_MAX_BODY // len(chunk) + 1):
            yield chunk
        yield b'"}}'

    response = await http.post(
        "/threads", content=chunks(), headers={"content-type": "application/json"}
    )
    assert "content-length" not in response.request.headers
    assert response.status_code == 413
    assert "RUNYARD_MAX_BODY_BYTES" in detail(response)


async def test_large_body_under_the_limit_is_accepted(http: httpx.AsyncClient) -> None:
    thread_id = str(uuid.uuid4())
    response = await http.post(
        f"/threads/{thread_id}/runs/wait",
        json={
            "assistant_id": "pipeline",
            "input": {"text": "y" * (2 * 1024 * 1024)},
            "if_not_exists": "create",
        },
    )
    assert response.status_code == 200, response.text[:300]


async def test_a_smaller_configured_limit_applies(tmp_path: Path) -> None:
    # The limit is HTTP middleware, the same on every backend: one dev server shows it.
    small = ServerProcess("dev", tmp_path / "small", env={"RUNYARD_MAX_BODY_BYTES": "2048"})
    await asyncio.to_thread(small.start)
    try:
        async with httpx.AsyncClient(base_url=small.url) as client:
            fits = await client.post("/threads", json={"metadata": {"a": "x" * 1000}})
            too_big = await client.post("/threads", json={"metadata": {"a": "x" * 3000}})
    finally:
        await asyncio.to_thread(small.stop)
    assert fits.status_code == 200
    assert too_big.status_code == 413
    assert "2048 bytes" in detail(too_big)


# --- metadata -----------------------------------------------------------------------------


async def test_metadata_over_64_kib_is_422_everywhere_it_is_sent(http: httpx.AsyncClient) -> None:
    metadata = big_metadata(MAX_METADATA)
    thread = (await http.post("/threads", json={"metadata": new_tag()})).json()
    thread_id = thread["thread_id"]
    attempts = [
        ("POST", "/threads", {"metadata": metadata}),
        ("PATCH", f"/threads/{thread_id}", {"metadata": metadata}),
        ("POST", "/threads/search", {"metadata": metadata}),
        ("POST", "/assistants", {"graph_id": "agent", "metadata": metadata}),
        ("PATCH", "/assistants/agent", {"metadata": metadata}),
        ("POST", f"/threads/{thread_id}/runs", {"assistant_id": "agent", "metadata": metadata}),
        ("POST", "/runs/wait", {"assistant_id": "agent", "metadata": metadata}),
    ]
    for method, path, body in attempts:
        response = await http.request(method, path, json=body)
        assert response.status_code == 422, (method, path, response.status_code)
        message = detail(response)
        assert "metadata" in message and str(MAX_METADATA) in message, message
    # Nothing was half-made by the refused requests.
    assert (await http.get(f"/threads/{thread_id}/runs")).json() == []
    found = await http.post(
        "/threads/search", json={"metadata": {"test_tag": metadata["test_tag"]}}
    )
    assert found.json() == []


async def test_metadata_just_under_the_limit_is_accepted(http: httpx.AsyncClient) -> None:
    metadata = big_metadata(MAX_METADATA - 200)
    response = await http.post("/threads", json={"metadata": metadata})
    assert response.status_code == 200
    assert response.json()["metadata"]["blob"] == metadata["blob"]


async def test_nul_characters_in_metadata_are_422(http: httpx.AsyncClient) -> None:
    for body in (
        {"metadata": {"key": "a\u0000b"}},
        {"metadata": {"k\u0000ey": 1}},
    ):
        for path in ("/threads", "/threads/search", "/threads/count"):
            response = await http.post(path, json=body)
            assert response.status_code == 422, (path, body, response.text)
            assert "NUL" in detail(response)


async def test_nul_characters_elsewhere_are_never_a_500(http: httpx.AsyncClient) -> None:
    thread_id = str(uuid.uuid4())
    response = await http.post(
        f"/threads/{thread_id}/runs/wait",
        json={"assistant_id": "pipeline", "input": {"text": "a\u0000b"}, "if_not_exists": "create"},
    )
    # PostgreSQL cannot store NUL in JSONB, and the embedded store refuses it alike: the
    # client is told which field, nothing is half-made.
    assert response.status_code == 422, response.text
    assert "NUL" in detail(response) and "input.text" in detail(response)
    assert (await http.get(f"/threads/{thread_id}")).status_code == 404


async def test_nul_characters_in_store_items_are_never_a_500(
    server: ServerProcess, http: httpx.AsyncClient
) -> None:
    namespace = [f"t{uuid.uuid4().hex[:12]}", "nul"]
    responses = {
        "key": await http.put(
            "/store/items", json={"namespace": namespace, "key": "k\u0000", "value": {}}
        ),
        "value": await http.put(
            "/store/items", json={"namespace": namespace, "key": "k", "value": {"v": "a\u0000"}}
        ),
        "read key": await http.get(
            "/store/items", params={"namespace": ".".join(namespace), "key": "k\u0000"}
        ),
        "filter": await http.post(
            "/store/items/search",
            json={"namespace_prefix": namespace, "filter": {"f\u0000": 1}},
        ),
    }
    for what, response in responses.items():
        # A body is refused before the store on both backends; a query parameter reaches
        # the store, and PostgreSQL (and psycopg before it) cannot store or search NUL.
        if server.mode == "serve" or what != "read key":
            assert response.status_code == 422, (what, response.text)
            assert "NUL" in detail(response)
        else:
            assert response.status_code < 500, (what, response.text)


async def test_a_nul_character_in_a_history_filter_is_never_a_500(http: httpx.AsyncClient) -> None:
    thread_id = (await http.post("/threads", json={})).json()["thread_id"]
    response = await http.post(
        f"/threads/{thread_id}/history", json={"metadata": {"k": "a\u0000b"}}
    )
    assert response.status_code == 422, response.text
    assert "NUL" in detail(response) and "metadata.k" in detail(response)


# --- ids, stream modes, pages -------------------------------------------------------------


async def test_ids_and_modes_are_validated(http: httpx.AsyncClient) -> None:
    not_uuid = await http.get("/threads/not-a-uuid")
    assert not_uuid.status_code == 422
    assert "thread_id" in detail(not_uuid)
    long_assistant = await http.post("/runs", json={"assistant_id": "a" * 256})
    assert long_assistant.status_code == 422
    assert "assistant_id" in detail(long_assistant)
    bad_mode = await http.post("/runs", json={"assistant_id": "agent", "stream_mode": "bogus"})
    assert bad_mode.status_code == 422
    assert "stream_mode" in detail(bad_mode)
    bad_assistant_id = await http.post(
        "/assistants", json={"graph_id": "agent", "assistant_id": "x"}
    )
    assert 400 <= bad_assistant_id.status_code < 500
    assert "UUID" in detail(bad_assistant_id)


@pytest.mark.parametrize("path", ["/threads/search", "/assistants/search"])
async def test_offset_beyond_32_bits_is_422(http: httpx.AsyncClient, path: str) -> None:
    response = await http.post(path, json={"offset": 2**31})
    assert response.status_code == 422
    assert "offset" in detail(response)
    assert (await http.post(path, json={"offset": 2**31 - 1})).json() == []


async def test_integers_beyond_64_bits_are_never_a_500(http: httpx.AsyncClient) -> None:
    # PostgreSQL's JSONB keeps any integer; the SQLite store's encoder stops at 64 bits.
    namespace = ["limits", uuid.uuid4().hex]
    response = await http.put(
        "/store/items", json={"namespace": namespace, "key": "k", "value": {"n": 2**70}}
    )
    assert response.status_code in (204, 422), response.text
    if response.status_code == 422:
        assert "64-bit" in detail(response)


# --- what one user holds (the defaults; test_tenants.py and test_cron_limits.py set others) --


@pytest.mark.parametrize(
    ("depth", "label", "key", "setting"),
    [
        (2, "l", "k" * 513, "RUNYARD_STORE_MAX_KEY_CHARS"),
        (2, "l" * 129, "k", "RUNYARD_STORE_MAX_LABEL_CHARS"),
        (11, "l", "k", "RUNYARD_STORE_MAX_NAMESPACE_LABELS"),
    ],
)
async def test_store_items_past_a_bound_are_422_naming_it(
    http: httpx.AsyncClient, depth: int, label: str, key: str, setting: str
) -> None:
    tag = new_tag()["test_tag"]
    namespace = [tag, *(label for _ in range(depth - 1))]
    refused = await http.put(
        "/store/items", json={"namespace": namespace, "key": key, "value": {"v": 1}}
    )
    assert refused.status_code == 422, refused.text
    assert setting in detail(refused)
    found = await http.post("/store/items/search", json={"namespace_prefix": [tag]})
    assert found.json()["items"] == []


async def test_a_store_item_past_the_index_entry_is_422_within_the_character_bounds(
    http: httpx.AsyncClient,
) -> None:
    """Ten labels of 128 CJK characters and a key of 512 take 5,400 bytes: more than
    PostgreSQL's index entry holds (it answered 500), though within every character bound."""
    # Random text: PostgreSQL compresses a repetitive entry below its bound.
    draw = random.Random(45)

    def cjk(length: int) -> str:
        return "".join(chr(0x4E00 + draw.randrange(20000)) for _ in range(length))

    namespace = [new_tag()["test_tag"], *(cjk(128) for _ in range(9))]
    body = {"namespace": namespace, "key": cjk(512), "value": {"v": 1}}
    refused = await http.put("/store/items", json=body)
    assert refused.status_code == 422, refused.text
    assert "bytes of UTF-8" in detail(refused) and "STORE_ENTRY_BYTES" in detail(refused)


async def test_store_items_at_the_bounds_are_accepted(http: httpx.AsyncClient) -> None:
    namespace = [new_tag()["test_tag"], *("l" * 128 for _ in range(9))]
    body = {"namespace": namespace, "key": "k" * 512, "value": {"v": 1}}
    assert (await http.put("/store/items", json=body)).status_code == 204
    item = await http.get(
        "/store/items", params={"namespace": ".".join(namespace), "key": "k" * 512}
    )
    assert item.json()["value"] == {"v": 1}


async def test_a_batch_past_its_bound_is_422_naming_it(http: httpx.AsyncClient) -> None:
    # Refused before any payload is read: an unknown assistant would be a 404.
    payload = {"assistant_id": "no-such-graph"}
    refused = await http.post("/runs/batch", json=[payload] * 1001)
    assert refused.status_code == 422, refused.text
    assert "RUNYARD_MAX_BATCH_RUNS" in detail(refused) and "1000" in detail(refused)
