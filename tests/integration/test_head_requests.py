"""`HEAD` on every `GET` route answers as the `GET` does, with no body.

Reference: langgraph-api 0.16.7 (`langgraph dev`) answers `HEAD /ok`, `/info`, `/docs`,
`/threads/{id}` and the rest with the `GET`'s status and headers, content-length included,
and no body; a `HEAD` of a stream answers its headers at once. Load balancers and uptime
checks send `HEAD`; Runyard answered 405.
"""

from __future__ import annotations

import re
import uuid

import httpx
import pytest

pytestmark = pytest.mark.timeout(120)

# Not in the OpenAPI document, served all the same.
UNLISTED = ("/docs", "/redoc", "/openapi.json", "/docs/assets/swagger-ui.css")
# Headers that may differ between two answers to the same request, and the framing the
# server adds to a body (a stream's chunks; LangGraph's server sends none with HEAD either).
VARYING = {"date", "x-request-id", "traceparent", "x-runyard-instance", "transfer-encoding"}


def get_paths(http: httpx.Client) -> list[str]:
    """Every GET route of the OpenAPI document, and the pages it does not list."""
    document = http.get("/openapi.json").json()
    listed = [path for path, item in document["paths"].items() if "get" in item]
    return sorted({*listed, *UNLISTED})


def concrete(path: str, thread_id: str, assistant_id: str) -> str:
    values = {"thread_id": thread_id, "assistant_id": assistant_id}
    return re.sub(r"\{(\w+)\}", lambda m: values.get(m.group(1), str(uuid.uuid4())), path)


def test_head_answers_every_get_route_with_its_status_and_headers(base_url: str) -> None:
    with httpx.Client(base_url=base_url, timeout=30) as http:
        thread_id = http.post("/threads", json={}).json()["thread_id"]
        assistant_id = http.post("/assistants/search", json={}).json()[0]["assistant_id"]
        paths = get_paths(http)
        assert "/threads/{thread_id}/stream" in paths  # a stream is among them
        for path in paths:
            url = concrete(path, thread_id, assistant_id)
            # Only the head of the GET: a stream is never read to its end here.
            with http.stream("GET", url) as got:
                get_status, get_headers = got.status_code, dict(got.headers)
            head = http.head(url)
            assert head.status_code == get_status, (path, head.status_code, get_status)
            assert head.status_code != 405, path
            assert head.content == b"", path
            # /metrics counts the requests themselves: its length grows with each.
            varying = VARYING | ({"content-length"} if path == "/metrics" else set())
            for name, value in get_headers.items():
                if name not in varying:
                    assert head.headers.get(name) == value, (path, name)


def test_a_405_lists_head_beside_get(base_url: str) -> None:
    answer = httpx.delete(f"{base_url}/info", timeout=10)
    assert answer.status_code == 405
    assert answer.headers["allow"] == "GET, HEAD"
