"""Bodies are read as JSON whatever Content-Type the client declares, as LangGraph's server does.

Reference: `langgraph dev` (langgraph-api 0.16.7) answers 200 to `POST /threads` with a JSON
body sent as `text/plain;charset=UTF-8` (what `fetch` sends when no type is set, as the Next.js
API passthrough of Agent Chat UI does), as `application/x-www-form-urlencoded` (curl's `-d`)
or with no Content-Type at all; a body that is not JSON gets 422 there too.
"""

from __future__ import annotations

import uuid

import httpx
import pytest

DECLARED_TYPES = [
    "text/plain;charset=UTF-8",
    "application/x-www-form-urlencoded",
    "application/octet-stream",
    None,
]


async def send(
    base_url: str, method: str, path: str, content: bytes, content_type: str | None
) -> httpx.Response:
    headers = {} if content_type is None else {"Content-Type": content_type}
    async with httpx.AsyncClient(base_url=base_url, timeout=30) as http:
        request = http.build_request(method, path, content=content, headers=headers)
        if content_type is None:
            request.headers.pop("Content-Type", None)
        return await http.send(request)


@pytest.mark.parametrize("content_type", DECLARED_TYPES)
async def test_json_bodies_are_read_whatever_their_declared_type(
    base_url: str, content_type: str | None
) -> None:
    tag = uuid.uuid4().hex
    created = await send(
        base_url, "POST", "/threads", b'{"metadata": {"tag": "%s"}}' % tag.encode(), content_type
    )
    assert created.status_code == 200, created.text
    thread_id = created.json()["thread_id"]
    assert created.json()["metadata"]["tag"] == tag

    found = await send(
        base_url,
        "POST",
        "/threads/search",
        b'{"metadata": {"tag": "%s"}, "limit": 5}' % tag.encode(),
        content_type,
    )
    assert found.status_code == 200, found.text
    assert [t["thread_id"] for t in found.json()] == [thread_id]

    patched = await send(
        base_url, "PATCH", f"/threads/{thread_id}", b'{"metadata": {"more": 1}}', content_type
    )
    assert patched.status_code == 200, patched.text
    assert patched.json()["metadata"] == {"tag": tag, "more": 1}

    waited = await send(
        base_url,
        "POST",
        f"/threads/{thread_id}/runs/wait",
        b'{"assistant_id": "pipeline", "input": {"text": "a"}}',
        content_type,
    )
    assert waited.status_code == 200, waited.text
    assert "text" in waited.json()

    stored = await send(
        base_url,
        "PUT",
        "/store/items",
        b'{"namespace": ["%s"], "key": "k", "value": {"v": 1}}' % tag.encode(),
        content_type,
    )
    assert stored.status_code == 204, stored.text


@pytest.mark.parametrize("content_type", [*DECLARED_TYPES, "application/json"])
@pytest.mark.parametrize("body", [b"not json", b'{"metadata": ', b"\xff\xfe", b'{"a": "\xe9\x80"}'])
async def test_a_body_that_is_not_json_gets_a_clear_422(
    base_url: str, content_type: str | None, body: bytes
) -> None:
    response = await send(base_url, "POST", "/threads", body, content_type)
    assert response.status_code == 422, response.text
    detail = response.json()["detail"]
    assert isinstance(detail, str) and "JSON" in detail, detail


async def test_a_json_body_of_the_wrong_shape_still_names_the_problem(base_url: str) -> None:
    response = await send(base_url, "POST", "/threads", b"[1, 2]", "text/plain")
    assert response.status_code == 422, response.text
    assert "dictionary" in response.json()["detail"]
