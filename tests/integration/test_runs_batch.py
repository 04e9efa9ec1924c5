"""POST /runs/batch: one stateless background run per payload, created in one request."""

from __future__ import annotations

import httpx
from langgraph_sdk.client import LangGraphClient

from tests.support.runs import TERMINAL, kwargs_of, new_tag, status_error, wait_for_status


async def test_batch_creates_one_background_run_per_payload(client: LangGraphClient) -> None:
    tag = new_tag()
    texts = ["a", "a b", "a b c"]
    runs = await client.runs.create_batch(
        [
            {
                "assistant_id": "pipeline",
                "input": {"text": text},
                "metadata": tag,
                "on_completion": "keep",
            }
            for text in texts
        ]
    )
    assert len(runs) == 3
    assert len({run["thread_id"] for run in runs}) == 3  # a temporary thread each
    assert [kwargs_of(run)["input"]["text"] for run in runs] == texts
    for run, text in zip(runs, texts, strict=True):
        done = await wait_for_status(client, run["thread_id"], run["run_id"], TERMINAL)
        assert done["status"] == "success"
        thread = await client.threads.get(run["thread_id"])
        assert thread["values"]["word_count"] == len(text.split())  # type: ignore[index]


async def test_batch_with_a_bad_payload_creates_no_run(client: LangGraphClient) -> None:
    tag = new_tag()
    payloads = [
        {"assistant_id": "pipeline", "input": {"text": "a"}, "metadata": tag},
        {"assistant_id": "no-such-graph", "input": {"text": "a"}, "metadata": tag},
    ]
    status, detail = await status_error(client.runs.create_batch(payloads))  # type: ignore[arg-type]
    assert status == 404
    assert "batch payload 1" in detail and "no-such-graph" in detail
    assert await client.threads.search(metadata=tag) == []


async def test_batch_refuses_an_empty_list_and_a_thread_only_field(base_url: str) -> None:
    async with httpx.AsyncClient(base_url=base_url, timeout=30) as http:
        empty = await http.post("/runs/batch", json=[])
        assert empty.status_code == 422
        resume = [{"assistant_id": "pipeline", "command": {"resume": "yes"}}]
        refused = await http.post("/runs/batch", json=resume)
        assert refused.status_code == 422
        assert "thread_id" in refused.text
        not_a_list = await http.post("/runs/batch", json={"assistant_id": "pipeline"})
        assert not_a_list.status_code == 422
