"""Bad input to the run endpoints gets a clear 4xx with a detail, never a 500 or a half-made run."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest

from tests.support.runs import (
    TERMINAL,
)

CREATE_PATHS = ["/runs", "/runs/stream", "/runs/wait"]


def stateful(path: str, thread_id: str) -> str:
    return f"/threads/{thread_id}{path}"


async def post(base_url: str, path: str, **kwargs: Any) -> httpx.Response:
    async with httpx.AsyncClient(base_url=base_url, timeout=30) as http:
        return await http.post(path, **kwargs)


def detail(response: httpx.Response) -> str:
    body = response.json()
    assert isinstance(body, dict), body
    assert isinstance(body.get("detail"), str) and body["detail"], body
    return str(body["detail"])


@pytest.fixture
async def thread_id(base_url: str) -> str:
    """An existing thread (made by a finished run)."""
    tid = str(uuid.uuid4())
    response = await post(
        base_url,
        f"/threads/{tid}/runs/wait",
        json={"assistant_id": "pipeline", "input": {"text": "a"}, "if_not_exists": "create"},
    )
    assert response.status_code == 200
    return tid


async def assert_no_runs(base_url: str, thread_id: str) -> None:
    """Only the run made by the fixture exists on the thread, and it is finished."""
    async with httpx.AsyncClient(base_url=base_url) as http:
        runs = (await http.get(f"/threads/{thread_id}/runs")).json()
    assert len(runs) == 1
    assert runs[0]["status"] in TERMINAL


@pytest.mark.parametrize("path", CREATE_PATHS)
@pytest.mark.parametrize("assistant_id", ["no-such-graph", "7e0c4a37-1a2b-4c3d-9e8f-0123456789ab"])
async def test_unknown_assistant_is_404(
    base_url: str, thread_id: str, path: str, assistant_id: str
) -> None:
    for target in (path, stateful(path, thread_id)):
        response = await post(base_url, target, json={"assistant_id": assistant_id, "input": {}})
        assert response.status_code == 404, (target, response.text)
        assert assistant_id in detail(response)
    await assert_no_runs(base_url, thread_id)


@pytest.mark.parametrize("path", CREATE_PATHS)
async def test_bad_stream_mode_is_422(base_url: str, thread_id: str, path: str) -> None:
    for target in (path, stateful(path, thread_id)):
        for mode in ("bogus", ["values", "telepathy"]):
            response = await post(
                base_url, target, json={"assistant_id": "pipeline", "stream_mode": mode}
            )
            assert response.status_code == 422, (target, mode, response.text)
            assert "stream_mode" in detail(response)
    await assert_no_runs(base_url, thread_id)


@pytest.mark.parametrize("path", CREATE_PATHS)
@pytest.mark.parametrize("if_not_exists", [None, "reject"])
async def test_unknown_thread_is_404(base_url: str, path: str, if_not_exists: str | None) -> None:
    body: dict[str, Any] = {"assistant_id": "pipeline", "input": {}}
    if if_not_exists:
        body["if_not_exists"] = if_not_exists
    thread_id = str(uuid.uuid4())
    response = await post(base_url, stateful(path, thread_id), json=body)
    assert response.status_code == 404
    assert thread_id in detail(response)
    async with httpx.AsyncClient(base_url=base_url) as http:
        assert (await http.get(f"/threads/{thread_id}/runs")).status_code == 404


@pytest.mark.parametrize("path", CREATE_PATHS)
@pytest.mark.parametrize("content", [b"{not json", b"", b"[1, 2]", b'"text"'])
async def test_malformed_body_is_422(
    base_url: str, thread_id: str, path: str, content: bytes
) -> None:
    for target in (path, stateful(path, thread_id)):
        response = await post(
            base_url, target, content=content, headers={"content-type": "application/json"}
        )
        assert response.status_code == 422, (target, content, response.text)
        detail(response)


@pytest.mark.parametrize("path", CREATE_PATHS)
async def test_missing_assistant_id_is_422(base_url: str, path: str) -> None:
    response = await post(base_url, path, json={"input": {}})
    assert response.status_code == 422
    assert "assistant_id" in detail(response)


@pytest.mark.parametrize(
    "field,value",
    [
        ("multitask_strategy", "nah"),
        ("if_not_exists", "sometimes"),
        ("on_disconnect", "explode"),
        ("on_completion", "archive"),
        ("after_seconds", -1),
        ("interrupt_before", "some-node"),
        ("webhook", "ftp://example.com/hook"),
        ("webhook", "not a url"),
        ("durability", "forever"),
    ],
)
async def test_bad_option_values_are_422(
    base_url: str, thread_id: str, field: str, value: Any
) -> None:
    response = await post(
        base_url,
        f"/threads/{thread_id}/runs",
        json={"assistant_id": "pipeline", "input": {}, field: value},
    )
    assert response.status_code == 422, response.text
    assert field in detail(response)
    await assert_no_runs(base_url, thread_id)


async def test_webhook_must_be_http_on_every_endpoint(base_url: str, thread_id: str) -> None:
    for path in CREATE_PATHS:
        for target in (path, stateful(path, thread_id)):
            response = await post(
                base_url,
                target,
                json={"assistant_id": "pipeline", "webhook": "file:///etc/passwd"},
            )
            assert response.status_code == 422, target
            assert "webhook" in detail(response)
    await assert_no_runs(base_url, thread_id)


async def test_resume_without_thread_is_refused(base_url: str) -> None:
    response = await post(
        base_url, "/runs/wait", json={"assistant_id": "asker", "command": {"resume": "yes"}}
    )
    assert response.status_code in (400, 422)
    assert "thread" in detail(response).lower()


async def test_unknown_run_routes_are_404(base_url: str, thread_id: str) -> None:
    run_id = str(uuid.uuid4())
    async with httpx.AsyncClient(base_url=base_url, timeout=30) as http:
        assert (await http.get(f"/threads/{thread_id}/runs/{run_id}")).status_code == 404
        assert (await http.delete(f"/threads/{thread_id}/runs/{run_id}")).status_code == 404
        assert (await http.post(f"/threads/{thread_id}/runs/{run_id}/cancel")).status_code == 404
        missing = str(uuid.uuid4())
        assert (await http.get(f"/threads/{missing}/runs")).status_code == 404


async def test_join_of_an_unknown_run_is_an_error(base_url: str, thread_id: str) -> None:
    async with httpx.AsyncClient(base_url=base_url, timeout=30) as http:
        response = await http.get(f"/threads/{thread_id}/runs/{uuid.uuid4()}/join")
    # LangGraph answers 200 with an __error__ body; a 404 is the clearer equivalent.
    if response.status_code == 200:
        assert "__error__" in response.json()
    else:
        assert response.status_code == 404


@pytest.mark.parametrize("bad_id", ["not-a-uuid", "1234"])
async def test_creating_a_thread_whose_id_is_not_a_uuid_is_refused(
    base_url: str, bad_id: str
) -> None:
    """LangGraph answers 422 "Invalid thread ID: must be a UUID"; no thread may be made."""
    body = {"assistant_id": "pipeline", "if_not_exists": "create"}
    async with httpx.AsyncClient(base_url=base_url, timeout=30) as http:
        for path in ("/runs", "/runs/wait", "/runs/stream"):
            response = await http.post(f"/threads/{bad_id}{path}", json=body)
            assert 400 <= response.status_code < 500, (path, response.text)
            detail(response)


@pytest.mark.parametrize("bad_id", ["not-a-uuid", "1234"])
async def test_run_routes_with_ids_that_are_not_uuids_answer_4xx(
    base_url: str, bad_id: str
) -> None:
    other = str(uuid.uuid4())
    requests = [
        ("GET", f"/threads/{bad_id}/runs"),
        ("GET", f"/threads/{other}/runs/{bad_id}"),
        ("GET", f"/threads/{other}/runs/{bad_id}/join"),
        ("POST", f"/threads/{other}/runs/{bad_id}/cancel"),
        ("DELETE", f"/threads/{other}/runs/{bad_id}"),
    ]
    async with httpx.AsyncClient(base_url=base_url, timeout=30) as http:
        for method, path in requests:
            response = await http.request(method, path)
            assert 400 <= response.status_code < 500, (method, path, response.text)
            detail(response)


async def test_bad_list_parameters_are_422(base_url: str, thread_id: str) -> None:
    async with httpx.AsyncClient(base_url=base_url) as http:
        for params in ({"status": "done"}, {"limit": 0}, {"offset": -1}, {"limit": "x"}):
            response = await http.get(f"/threads/{thread_id}/runs", params=params)
            assert response.status_code == 422, params
            detail(response)


async def test_bad_cancel_action_is_422(base_url: str, thread_id: str) -> None:
    async with httpx.AsyncClient(base_url=base_url) as http:
        runs = (await http.get(f"/threads/{thread_id}/runs")).json()
        response = await http.post(
            f"/threads/{thread_id}/runs/{runs[0]['run_id']}/cancel", params={"action": "explode"}
        )
    assert response.status_code == 422
    assert "action" in detail(response)
