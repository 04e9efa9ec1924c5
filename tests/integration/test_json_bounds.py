"""Every JSON the API stores is bounded at write time: no lone surrogate, no NaN, Infinity or
overflowing number, no nesting deeper than MAX_JSON_DEPTH. A refusal is a 422 naming the
field (or, on the JSON-RPC routes and the thread session, their protocol's error); nothing is
written first, and nothing the server stores is unreadable afterwards.

Reference: `langgraph dev` (langgraph-api 0.16.7) reads bodies with orjson, which refuses
NaN, Infinity, 1e400 and lone surrogates as malformed JSON (a 422 there too).
"""

from __future__ import annotations

import json
import uuid

import httpx
import pytest
from websockets.asyncio.client import connect

from runyard.domain.json_bounds import MAX_JSON_DEPTH

SURROGATE = '"\\ud800"'  # a JSON escape of a lone surrogate: valid JSON text, no valid string
LEAKS = ("SQL", "INSERT", "asyncpg", "sqlite", "codec", "DataError", "Traceback")


def text(document: object, raw: str) -> str:
    """`document` as JSON text, with `raw` (a JSON text) where it holds the string "@"."""
    return json.dumps(document).replace('"@"', raw)


def nested(depth: int, leaf: str = "1") -> str:
    """A JSON text of `depth` nested objects around `leaf` (depth 0 is the leaf itself)."""
    return '{"a":' * depth + leaf + "}" * depth


async def post(base_url: str, method: str, path: str, body: str) -> httpx.Response:
    async with httpx.AsyncClient(base_url=base_url, timeout=30) as http:
        return await http.request(
            method, path, content=body.encode(), headers={"Content-Type": "application/json"}
        )


def assert_refused(response: httpx.Response, field: str, *words: str) -> None:
    assert response.status_code == 422, response.text
    assert response.headers["content-type"].startswith("application/json")
    detail = response.json()["detail"]
    assert field in detail, detail
    for word in words:
        assert word in detail, detail
    assert not any(leak in response.text for leak in LEAKS), response.text


@pytest.mark.parametrize(
    ("method", "path", "body", "field"),
    [
        ("POST", "/threads", text({"metadata": {"tag": "@"}}, SURROGATE), "metadata.tag"),
        (
            "POST",
            "/runs/wait",
            text({"assistant_id": "agent", "input": {"messages": ["@"]}}, SURROGATE),
            "input.messages.0",
        ),
        (
            "PUT",
            "/store/items",
            text({"namespace": ["n"], "key": "k", "value": {"v": "@"}}, SURROGATE),
            "value.v",
        ),
        ("POST", "/assistants", text({"graph_id": "agent", "name": "@"}, SURROGATE), "name"),
        ("POST", "/threads", text({"metadata": {"@": 1}}, SURROGATE), "metadata"),
    ],
)
async def test_a_lone_surrogate_is_refused_naming_its_field(
    base_url: str, method: str, path: str, body: str, field: str
) -> None:
    assert_refused(await post(base_url, method, path, body), field, "surrogate")


@pytest.mark.parametrize("number", ["NaN", "Infinity", "-Infinity", "1e400"])
async def test_non_finite_numbers_in_metadata_are_refused_not_stored_as_null(
    base_url: str, number: str
) -> None:
    tag = uuid.uuid4().hex
    body = text({"metadata": {"tag": tag, "score": "@"}}, number)
    assert_refused(await post(base_url, "POST", "/threads", body), "metadata.score", "finite")
    found = await post(base_url, "POST", "/threads/search", json.dumps({"metadata": {"tag": tag}}))
    assert found.json() == []  # nothing was written


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/threads/search", '{"limit": NaN}', "limit"),
        ("/threads/search", '{"offset": Infinity}', "offset"),
        ("/store/items/search", '{"namespace_prefix": [], "limit": NaN}', "limit"),
        ("/store/items/search", '{"namespace_prefix": [], "offset": Infinity}', "offset"),
    ],
)
async def test_non_finite_paging_is_refused(
    base_url: str, path: str, body: str, field: str
) -> None:
    assert_refused(await post(base_url, "POST", path, body), field)


async def test_nan_in_a_store_value_is_refused(base_url: str) -> None:
    body = '{"namespace": ["nan"], "key": "k", "value": {"x": [1, NaN]}}'
    assert_refused(await post(base_url, "PUT", "/store/items", body), "value.x.1")


async def test_store_values_are_bounded_so_every_stored_one_reads_back(base_url: str) -> None:
    prefix = uuid.uuid4().hex
    # The body wraps the value in one object: the deepest value it takes is one level less.
    deepest = nested(MAX_JSON_DEPTH - 1)
    body = text({"namespace": [prefix, "ok"], "key": "deep", "value": "@"}, deepest)
    stored = await post(base_url, "PUT", "/store/items", body)
    assert stored.status_code == 204, stored.text

    too_deep = nested(900)
    body = text({"namespace": [prefix, "bad"], "key": "deep", "value": "@"}, too_deep)
    refused = await post(base_url, "PUT", "/store/items", body)
    assert_refused(refused, "value", f"{MAX_JSON_DEPTH} levels")

    async with httpx.AsyncClient(base_url=base_url, timeout=30) as http:
        got = await http.get("/store/items", params={"namespace": f"{prefix}.ok", "key": "deep"})
        assert got.status_code == 200, got.text
        assert got.json()["value"] == json.loads(deepest)
        found = await http.post("/store/items/search", json={"namespace_prefix": [prefix]})
        assert found.status_code == 200, found.text
        assert [item["namespace"] for item in found.json()["items"]] == [[prefix, "ok"]]


async def test_a_body_nested_ten_thousand_deep_is_refused_naming_the_bound(base_url: str) -> None:
    response = await post(base_url, "POST", "/threads", text({"metadata": "@"}, nested(10_000)))
    assert response.status_code == 422, response.text
    detail = response.json()["detail"]
    assert f"{MAX_JSON_DEPTH} levels" in detail, detail
    assert "There was an error parsing the body" not in detail


async def test_mcp_arguments_nested_too_deep_get_a_json_rpc_error(base_url: str) -> None:
    call = {"jsonrpc": "2.0", "id": 7, "method": "tools/call"}
    body = text({**call, "params": {"name": "agent", "arguments": "@"}}, nested(5000))
    response = await post(base_url, "POST", "/mcp", body)
    assert response.status_code == 400, response.text
    answer = response.json()
    assert answer["jsonrpc"] == "2.0"
    assert str(MAX_JSON_DEPTH) in answer["error"]["message"]


async def test_a2a_message_with_a_lone_surrogate_gets_a_protocol_error_naming_it(
    base_url: str,
) -> None:
    parts = [{"kind": "text", "text": "@"}]
    message = {"role": "user", "messageId": str(uuid.uuid4()), "parts": parts}
    send = {"jsonrpc": "2.0", "id": 3, "method": "message/send", "params": {"message": message}}
    response = await post(base_url, "POST", "/a2a/agent", text(send, SURROGATE))
    assert response.headers["content-type"].startswith("application/json"), response.text
    answer = response.json()
    assert answer["id"] == 3
    assert "surrogate" in answer["error"]["message"], answer
    assert "params.message.parts.0.text" in answer["error"]["message"], answer
    assert not any(leak in response.text for leak in LEAKS), response.text


async def test_session_run_start_with_a_lone_surrogate_answers_no_sql(base_url: str) -> None:
    thread_id = str(uuid.uuid4())
    ws_url = base_url.replace("http://", "ws://") + f"/threads/{thread_id}/stream/events"
    params = {"assistant_id": "agent", "input": {"messages": [{"role": "user", "content": "@"}]}}
    command = text({"id": 1, "method": "run.start", "params": params}, SURROGATE)
    async with connect(ws_url) as socket:
        await socket.send(command)
        reply = json.loads(await socket.recv())
    assert reply["type"] == "error", reply
    assert reply["id"] == 1
    assert reply["error"] == "invalid_argument", reply
    assert "params.input.messages.0.content" in reply["message"], reply
    assert not any(leak in reply["message"] for leak in LEAKS), reply
    over_http = await post(base_url, "POST", f"/threads/{thread_id}/commands", command)
    assert_refused(over_http, "params.input.messages.0.content", "surrogate")
