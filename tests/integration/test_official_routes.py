"""Routes LangGraph's server has beside the Agent Protocol: `/`, `/ok?check_db=1` and
`/metrics?format=json`, compared with `langgraph dev` 0.16.7 (langgraph-api 0.16.7)."""

from __future__ import annotations

import uuid

import httpx


async def test_root_answers_ok_as_the_official_server(base_url: str) -> None:
    """langgraph dev 0.16.7: GET / answers 200 {"ok": true, ...} (a load balancer's probe)."""
    async with httpx.AsyncClient(base_url=base_url) as http:
        answer = await http.get("/")
    assert answer.status_code == 200
    assert answer.json() == {"ok": True}


async def test_ok_with_check_db_names_each_dependency(base_url: str) -> None:
    """langgraph-api 0.16.7: GET /ok?check_db=1 answers {"ok": true, "services": {name:
    "healthy"}} (500 and "unhealthy" when one fails); without it, no dependency is checked."""
    async with httpx.AsyncClient(base_url=base_url) as http:
        checked = await http.get("/ok", params={"check_db": 1})
        plain = await http.get("/ok", params={"check_db": 0})
        bad = await http.get("/ok", params={"check_db": "yes"})
    assert checked.status_code == 200
    assert checked.json() == {"ok": True, "services": {"database": "healthy"}}
    assert plain.json() == {"ok": True}
    assert bad.status_code == 422
    assert "check_db" in bad.text


async def test_metrics_as_json_in_the_official_shape(base_url: str) -> None:
    """langgraph dev 0.16.7: GET /metrics?format=json answers {"queue": {"n_pending",
    "n_running", ...}, "api": {"http_requests_total": [{method, path, status, count}]},
    "workers": {"max", "active", "available"}}; any other format is Prometheus text."""
    async with httpx.AsyncClient(base_url=base_url) as http:
        await http.get("/info")
        answer = await http.get("/metrics", params={"format": "json"})
        text = await http.get("/metrics")
    assert answer.status_code == 200
    body = answer.json()
    assert body["queue"]["n_pending"] >= 0
    assert body["queue"]["n_running"] >= 0
    assert "pending_runs_wait_time_max_secs" in body["queue"]
    counted = [
        entry
        for entry in body["api"]["http_requests_total"]
        if entry["method"] == "GET" and entry["path"] == "/info" and entry["status"] == 200
    ]
    assert counted and counted[0]["count"] >= 1
    workers = body["workers"]
    assert workers["max"] == 500
    assert workers["active"] + workers["available"] == workers["max"]
    assert text.headers["content-type"].startswith("text/plain")


async def test_thread_storage_in_the_official_shape(base_url: str) -> None:
    """langgraph dev 0.16.7: GET /threads/{id}/storage answers {"thread_id", "total_bytes",
    "checkpoints": {count, bytes}, "channel_values": {count, bytes, by_channel: {name:
    {versions, bytes}}}, "pending_writes": {count, bytes}}, and 404 for an unknown thread."""
    async with httpx.AsyncClient(base_url=base_url, timeout=30) as http:
        thread_id = (await http.post("/threads", json={})).json()["thread_id"]
        empty = (await http.get(f"/threads/{thread_id}/storage")).json()
        await http.post(
            f"/threads/{thread_id}/runs/wait",
            json={"assistant_id": "pipeline", "input": {"text": "some words to keep"}},
        )
        answer = await http.get(f"/threads/{thread_id}/storage")
        missing = await http.get(f"/threads/{uuid.uuid4()}/storage")
    assert empty["total_bytes"] == 0
    assert answer.status_code == 200
    body = answer.json()
    assert body["thread_id"] == thread_id
    assert body["checkpoints"]["count"] >= 1
    assert body["checkpoints"]["bytes"] > 0
    channels = body["channel_values"]
    assert channels["bytes"] == sum(c["bytes"] for c in channels["by_channel"].values())
    assert body["total_bytes"] == (
        body["checkpoints"]["bytes"] + channels["bytes"] + body["pending_writes"]["bytes"]
    )
    assert set(body["pending_writes"]) == {"count", "bytes"}
    assert missing.status_code == 404
