"""A run's webhook is owed from the moment its end is committed: the delivery is written in
the transaction that ends the run, so an instance that dies right after that commit (before
anything that follows it) leaves the delivery in the outbox for another to make.

The hook replaces everything after the commit (`RunEndings.end`: last events, dispatch,
webhook) with nothing, as a SIGKILL there would; the test then reads the outbox table. For a
run that finishes, a pending run a strategy interrupts, and a pending run cancelled;
on SQLite and on PostgreSQL.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from runyard.db import runs as runs_db
from runyard.db import webhooks as webhooks_db
from runyard.domain.status import CancelAction
from runyard.lifecycle.endings import RunEndings
from runyard.schemas.runs import RunCreate
from runyard.wiring.runtime import Runtime
from runyard.worker.webhooks import WebhookSender
from tests.support.backends import backend_runtime

pytestmark = pytest.mark.timeout(60)

# Never contacted: this instance's outbox loop is held off too.
HOOK = "https://93.184.216.34/runyard"
ENDED = {"success", "error", "interrupted", "timeout"}


@pytest.fixture(params=["sqlite", "postgres"])
async def runtime(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Runtime]:
    async def died_after_the_commit(self: RunEndings, run: Any, *args: Any, **how: Any) -> None:
        """The instance is gone: nothing after the end's commit happens."""

    async def no_outbox_loop(self: WebhookSender, stop: asyncio.Event) -> None:
        """Nor does this instance's outbox loop: another instance's would make the delivery."""

    monkeypatch.setattr(RunEndings, "end", died_after_the_commit)
    monkeypatch.setattr(WebhookSender, "run_forever", no_outbox_loop)
    async with backend_runtime(request.param, tmp_path) as rt:
        yield rt


async def _owed(rt: Runtime, run_id: str) -> dict[str, Any] | None:
    async with rt.autocommit() as session:
        return await webhooks_db.get_delivery(session, f"msg_{run_id}")


async def _until_owed(rt: Runtime, run_id: str) -> dict[str, Any]:
    """The delivery owed for `run_id`, once its run has ended."""
    for _ in range(400):
        delivery = await _owed(rt, run_id)
        if delivery is not None or await _status(rt, run_id) in ENDED:
            break
        await asyncio.sleep(0.05)
    delivery = await _owed(rt, run_id)
    assert delivery is not None, f"run {run_id} ended {await _status(rt, run_id)}, nothing owed"
    return delivery


async def _status(rt: Runtime, run_id: str) -> str | None:
    async with rt.autocommit() as session:
        run = await runs_db.get_run(session, run_id)
    return None if run is None else run.status.value


async def _pending_run_with_a_webhook(rt: Runtime) -> tuple[str, str]:
    """A new thread's run due in ten minutes, with a webhook: its thread and run ids."""
    thread_id = str(uuid.uuid4())
    body = RunCreate(
        assistant_id="slow",
        input={"seconds": 0},
        webhook=HOOK,
        after_seconds=600,
        if_not_exists="create",
    )
    run = await rt.services.runs.create_run(thread_id, body)
    run_id = str(run.run_id)
    assert await _owed(rt, run_id) is None  # pending: nothing owed yet
    return thread_id, run_id


async def test_a_finished_runs_webhook_is_owed_when_its_end_commits(runtime: Runtime) -> None:
    rt = runtime
    body = RunCreate(assistant_id="slow", input={"seconds": 0}, webhook=HOOK)
    run = await rt.services.runs.create_run(None, body)
    run_id = str(run.run_id)
    delivery = await _until_owed(rt, run_id)
    assert delivery["url"] == HOOK and delivery["status"] == "pending"
    assert delivery["payload"]["status"] == "success"
    assert delivery["payload"]["values"]["steps"] == ["first", "second"]


async def test_a_cancelled_pending_runs_webhook_is_owed_when_its_end_commits(
    runtime: Runtime,
) -> None:
    rt = runtime
    thread_id, run_id = await _pending_run_with_a_webhook(rt)
    await rt.services.runs.cancel_run(thread_id, run_id, action=CancelAction.INTERRUPT)
    assert await _status(rt, run_id) == "interrupted"
    delivery = await _until_owed(rt, run_id)
    assert delivery["payload"]["status"] == "interrupted"


async def test_a_pending_run_a_strategy_interrupts_owes_its_webhook(runtime: Runtime) -> None:
    rt = runtime
    thread_id, run_id = await _pending_run_with_a_webhook(rt)
    second = RunCreate(assistant_id="slow", input={"seconds": 0}, multitask_strategy="interrupt")
    await rt.services.runs.create_run(thread_id, second)
    assert await _status(rt, run_id) == "interrupted"
    delivery = await _until_owed(rt, run_id)
    assert delivery["payload"]["status"] == "interrupted"
