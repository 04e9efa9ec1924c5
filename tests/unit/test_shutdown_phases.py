"""The named shutdown phases: in order, each bounded, logged, and safe to run twice or before
anything started; a Runtime stopped before its start, or twice, is fine."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest

from runyard.settings import Settings
from runyard.wiring.runtime import Runtime
from runyard.wiring.shutdown import Phase, ShutdownPhases
from tests.support.server import TEST_CONFIG

pytestmark = pytest.mark.timeout(30)
BOUNDS = dict.fromkeys(Phase, 5.0)


async def test_phases_run_in_order_each_step_once() -> None:
    ran: list[str] = []
    phases = ShutdownPhases(BOUNDS)

    def step(name: str) -> object:
        async def run() -> None:
            ran.append(name)

        return run

    # Registered in start order; a phase's steps run in reverse (loops before connections).
    phases.add(Phase.CLOSE_STORE, step("engine"))
    phases.add(Phase.CLOSE_STORE, step("store loops"))
    phases.add(Phase.CLOSE_TRANSPORT, step("redis"))
    phases.add(Phase.HAND_BACK, step("hand back"))
    phases.add(Phase.DRAIN, step("drain"))
    phases.add(Phase.STOP_INTAKE, step("intake"))
    await phases.run()
    await phases.run()
    assert ran == ["intake", "drain", "hand back", "redis", "store loops", "engine"]


async def test_a_step_past_its_phase_bound_is_cut_and_the_rest_still_runs(
    caplog: pytest.LogCaptureFixture,
) -> None:
    ran: list[str] = []
    phases = ShutdownPhases({**BOUNDS, Phase.CLOSE_TRANSPORT: 0.1})
    hung = asyncio.Event()

    async def closes() -> None:
        ran.append("closed")

    async def hangs() -> None:
        await hung.wait()

    async def store() -> None:
        ran.append("store")

    phases.add(Phase.CLOSE_TRANSPORT, closes)
    phases.add(Phase.CLOSE_TRANSPORT, hangs)
    phases.add(Phase.CLOSE_STORE, store)
    with caplog.at_level(logging.INFO, logger="runyard.shutdown"):
        await asyncio.wait_for(phases.run(), 5)
    assert ran == ["closed", "store"]
    ended = [r.getMessage() for r in caplog.records if "shutdown_phase_ended" in r.getMessage()]
    assert [message.split()[1] for message in ended] == [f"phase={phase}" for phase in Phase]
    assert "outcome=timed_out" in ended[3] and "outcome=done" in ended[4]


async def test_a_failing_step_does_not_keep_the_later_phases_from_running() -> None:
    ran: list[str] = []
    phases = ShutdownPhases(BOUNDS)

    async def fails() -> None:
        raise RuntimeError("cannot close")

    async def store() -> None:
        ran.append("store")

    phases.add(Phase.CLOSE_TRANSPORT, fails)
    phases.add(Phase.CLOSE_STORE, store)
    await phases.run()
    assert ran == ["store"]


async def test_a_runtime_stops_before_its_start_and_twice_after_it(tmp_path: Path) -> None:
    never_started = Runtime(Settings(RUNYARD_CONFIG=TEST_CONFIG, RUNYARD_DATA_DIR=tmp_path / "a"))
    await never_started.stop()
    assert not never_started.draining
    never_started.begin_drain()  # a signal before the workers started: nothing to drain

    rt = Runtime(Settings(RUNYARD_CONFIG=TEST_CONFIG, RUNYARD_DATA_DIR=tmp_path / "b"))
    await rt.start()
    assert not rt.draining
    rt.begin_drain()
    rt.begin_drain()
    assert rt.draining and rt.workers.draining
    await rt.stop()
    await rt.stop()
    assert rt.dead_parts() == []
