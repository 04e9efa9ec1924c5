"""A statement the database refuses every time fails the run after BG_JOB_MAX_RETRIES
attempts, instead of being handed back as a store outage forever."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from tests.chaos.cluster import DEFAULT_ENV, ClusterFactory, wait_terminal

# Every checkpoint of the marked thread takes longer to write than the database allows.
STATEMENT_TIMEOUT = "3s"
SLOW_CHECKPOINT = """
CREATE FUNCTION slow_checkpoint() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.thread_id = '{thread_id}' THEN PERFORM pg_sleep(30); END IF;
  RETURN NEW;
END $$;
CREATE TRIGGER slow_checkpoint BEFORE INSERT OR UPDATE ON checkpoints
  FOR EACH ROW EXECUTE FUNCTION slow_checkpoint();
"""


@pytest.mark.slow
@pytest.mark.timeout(150)
async def test_a_checkpoint_that_always_times_out_fails_the_run_after_its_retries(
    cluster_factory: ClusterFactory,
) -> None:
    """statement_timeout (57014) on every checkpoint write of a run: each attempt counts,
    and the third (BG_JOB_MAX_RETRIES=3, the default) ends the run `error` saying why."""
    cluster = await cluster_factory(0, **DEFAULT_ENV)
    name = cluster.database_url.rsplit("/", 1)[1]
    cluster.sql(f"ALTER DATABASE \"{name}\" SET statement_timeout = '{STATEMENT_TIMEOUT}'")
    instance = await asyncio.to_thread(cluster.add, True)
    thread_id = str(uuid.uuid4())
    cluster.sql(SLOW_CHECKPOINT.format(thread_id=thread_id))

    run = await instance.client.runs.create(
        thread_id, "steps", input=cluster.steps_input(0.1), if_not_exists="create"
    )
    run_id = str(run["run_id"])
    # A run handed back as an outage would stay pending/running for ever.
    final = await wait_terminal(cluster, [(thread_id, run_id)], timeout=90)
    assert final == {run_id: "error"}, cluster.tails()

    joined = await instance.http.get(f"/threads/{thread_id}/runs/{run_id}/join")
    error = joined.json()["__error__"]
    assert error["error"] == "StoreFault", error
    assert "57014" in error["message"] and "statement timeout" in error["message"], error
    assert "BG_JOB_MAX_RETRIES=3" in error["message"], error
    [(attempt, handovers)] = cluster.sql(
        "SELECT attempt, handovers FROM runs WHERE run_id = %s", run_id
    )
    assert (attempt, handovers) == (3, 0)

    # The thread is free again: its next run executes (its checkpoints are not slowed).
    cluster.sql("DROP TRIGGER slow_checkpoint ON checkpoints")
    after = await instance.client.runs.create(thread_id, "steps", input=cluster.steps_input(0))
    final = await wait_terminal(cluster, [(thread_id, str(after["run_id"]))], timeout=30)
    assert set(final.values()) == {"success"}, cluster.tails()
