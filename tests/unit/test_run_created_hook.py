"""create_run's `on_created` runs after the commit and before the dispatch, for new runs only."""

from __future__ import annotations

from pathlib import Path

from runyard.schemas.runs import RunCreate
from runyard.settings import Settings
from runyard.wiring.runtime import Runtime
from tests.support.server import TEST_CONFIG


async def test_on_created_sees_the_run_committed_and_not_yet_dispatched(tmp_path: Path) -> None:
    rt = Runtime(Settings(RUNYARD_CONFIG=TEST_CONFIG, RUNYARD_DATA_DIR=tmp_path / "data"))
    await rt.start()
    try:
        seen: list[tuple[str, str, int]] = []

        async def on_created(run_id: str) -> None:
            # Committed (readable), still pending, and not on the queue yet.
            stored = await rt.services.runs.get_run(None, run_id)
            seen.append((run_id, stored.status, await rt.queue.depth()))

        body = RunCreate(assistant_id="pipeline", input={"text": "a b"})
        run = await rt.services.runs.create_run(
            None, body, idempotency_key="k1", on_created=on_created
        )
        assert seen == [(run.run_id, "pending", 0)]

        # The same Idempotency-Key answers with the existing run: nothing new is created.
        again = await rt.services.runs.create_run(
            None, body, idempotency_key="k1", on_created=on_created
        )
        assert again.run_id == run.run_id
        assert len(seen) == 1
    finally:
        await rt.stop()
