"""Every list and search route bounds `limit` and `offset`: a value past them is a 422 naming
the field, never a 500 (a number past 64 bits overflowed the database driver).

Compared with `langgraph dev` (langgraph-api 0.16.7) side by side: its search routes take
`limit` 1 to 1000 and `offset` from 0, and answer 422 outside them; Runyard also caps
`offset` (at 2^31 - 1) so that the databases can take it.
"""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest

from runyard.schemas.common import MAX_OFFSET

pytestmark = pytest.mark.timeout(60)

HUGE = 502689281629990254699631083520  # past 64 bits, as a fuzzer sent it
PAGING = ("limit", "offset", "max_depth")
# The bad values each paging field is tried with.
BAD = {
    "limit": [HUGE, 0, -1, 1001],
    "offset": [HUGE, -1, MAX_OFFSET + 1],
    "max_depth": [HUGE, -1],
}


def concrete(path: str, thread_id: str) -> str:
    """The path with ids filled in: a real thread and assistant (so nothing answers 404
    before the paging values are used), random UUIDs for the rest."""
    path = path.replace("{thread_id}", thread_id).replace("{assistant_id}", "agent")
    for name in ("run_id", "cron_id"):
        path = path.replace("{" + name + "}", str(uuid.uuid4()))
    return path


def body_schema(document: dict[str, Any], operation: dict[str, Any]) -> dict[str, Any]:
    """The JSON schema of the operation's body, its `$ref` resolved ({} when it has none)."""
    content = operation.get("requestBody", {}).get("content", {})
    schema = content.get("application/json", {}).get("schema", {})
    for option in schema.get("anyOf", [schema]):
        ref = option.get("$ref")
        if ref:
            return dict(document["components"]["schemas"][ref.rsplit("/", 1)[1]])
    return schema


def paging_inputs(document: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    """(method, path, where, field) for every paging field an operation takes."""
    found = []
    for path, item in document["paths"].items():
        for method, operation in item.items():
            for param in operation.get("parameters", []):
                if param["in"] == "query" and param["name"] in PAGING:
                    found.append((method, path, "query", param["name"]))
            properties = body_schema(document, operation).get("properties", {})
            found.extend((method, path, "body", name) for name in PAGING if name in properties)
    return found


async def test_every_paging_field_past_its_bounds_is_a_422_naming_it(base_url: str) -> None:
    async with httpx.AsyncClient(base_url=base_url, timeout=30) as http:
        document = (await http.get("/openapi.json")).json()
        thread_id = (await http.post("/threads", json={})).json()["thread_id"]
        inputs = paging_inputs(document)
        # The routes a fuzzer reached: threads, runs, assistants, crons, store.
        assert {"/threads/{thread_id}/runs", "/threads/search", "/store/items/search"} <= {
            path for _, path, _, _ in inputs
        }
        wrong = []
        for method, path, where, field in inputs:
            for bad in BAD[field]:
                request: dict[str, Any] = (
                    {"params": {field: str(bad)}} if where == "query" else {"json": {field: bad}}
                )
                url = concrete(path, thread_id)
                answer = await http.request(method.upper(), url, **request)
                if answer.status_code != 422 or field not in answer.text:
                    wrong.append(
                        f"{method} {path} {field}={bad}: {answer.status_code} {answer.text}"[:300]
                    )
        assert not wrong, "\n".join(wrong)


async def test_the_runs_list_takes_the_largest_offset_it_declares(base_url: str) -> None:
    async with httpx.AsyncClient(base_url=base_url, timeout=30) as http:
        thread = (await http.post("/threads", json={})).json()
        answer = await http.get(
            f"/threads/{thread['thread_id']}/runs", params={"offset": MAX_OFFSET, "limit": 1000}
        )
        assert answer.status_code == 200, answer.text
        assert answer.json() == []
