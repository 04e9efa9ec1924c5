"""A task stopped mid-way leaves nothing behind: the resumed attempt runs it again.

LangGraph stores a cancelled task's writes with the cancellation as its error. When the
cancel lands after the node returned but before its conditional edge was taken, the stored
writes hold both the node's output and that error, and a resume from them finds nothing to
run: the run ended `success` with its last step lost (a drain that handed a run over mid
step, on a two-container deployment, ended it at 31 of 40 steps).

Here the edge function holds the step open; the attempt is stopped as a draining instance
stops it (`release`), and the run is handed back and claimed again on the same instance.
"""

from __future__ import annotations

import asyncio
import json
import operator
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Annotated

import pytest
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

from runyard.domain.run import RunRecord
from runyard.domain.status import TERMINAL_RUN_STATUSES, StandDown
from runyard.schemas.runs import RunCreate
from runyard.wiring.runtime import Runtime
from tests.support.backends import backend_runtime

STEPS = 3


class Steps(TypedDict, total=False):
    steps: Annotated[list[int], operator.add]


class Gate:
    """Holds the first edge decision open until the attempt is cancelled."""

    def __init__(self) -> None:
        self.hold = False
        self.entered = asyncio.Event()


GATE = Gate()


async def step(state: Steps) -> Steps:
    return {"steps": [len(state.get("steps", []))]}


async def route(state: Steps) -> str:
    if GATE.hold:
        GATE.hold = False
        GATE.entered.set()
        await asyncio.Event().wait()
    return "step" if len(state.get("steps", [])) < STEPS else END


_builder = StateGraph(Steps)
_builder.add_node("step", step)
_builder.add_edge(START, "step")
_builder.add_conditional_edges("step", route, ["step", END])
graph = _builder.compile()


@pytest.fixture(params=["sqlite", "postgres"])
async def runtime(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Runtime]:
    config = tmp_path / "langgraph.json"
    config.write_text(json.dumps({"graphs": {"held": f"{Path(__file__).resolve()}:graph"}}))
    async with backend_runtime(request.param, tmp_path, config) as rt:
        yield rt


async def _ended(rt: Runtime, thread_id: str, run_id: str) -> RunRecord:
    for _ in range(600):
        run = await rt.services.runs.get_run(thread_id, run_id)
        if run.status in TERMINAL_RUN_STATUSES:
            return run
        await asyncio.sleep(0.05)
    raise AssertionError(f"run {run_id} never ended")


async def test_a_step_stopped_before_its_edge_runs_again_on_resume(runtime: Runtime) -> None:
    rt = runtime
    GATE.hold, GATE.entered = True, asyncio.Event()
    thread_id = str(uuid.uuid4())
    run = await rt.services.runs.create_run(
        thread_id, RunCreate(assistant_id="held", input={}, if_not_exists="create")
    )
    await asyncio.wait_for(GATE.entered.wait(), 30)
    # The first step's node has returned; its edge is being decided. A draining instance
    # stops the attempt now and hands the run back.
    assert rt.running.stop(run.run_id, StandDown.RELEASE)

    ended = await _ended(rt, thread_id, run.run_id)
    assert ended.status == "success"
    assert ended.attempt == 2
    state = await rt.services.thread_state.get_state(thread_id)
    assert state["values"]["steps"] == list(range(STEPS))
