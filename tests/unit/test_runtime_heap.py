"""A started runtime keeps the garbage collector off its long-lived objects, and undoes it."""

from __future__ import annotations

import gc
from pathlib import Path

from runyard.settings import Settings
from runyard.wiring.heap import GC_YOUNG_THRESHOLD
from runyard.wiring.runtime import Runtime
from tests.support.server import TEST_CONFIG


async def test_start_freezes_the_heap_and_stop_restores_the_collector(tmp_path: Path) -> None:
    before = gc.get_threshold()
    rt = Runtime(Settings(RUNYARD_CONFIG=TEST_CONFIG, RUNYARD_DATA_DIR=tmp_path / "data"))
    try:
        await rt.start()
        assert gc.get_freeze_count() > 0
        assert gc.get_threshold() == (max(before[0], GC_YOUNG_THRESHOLD), *before[1:])
    finally:
        await rt.stop()
    assert gc.get_freeze_count() == 0
    assert gc.get_threshold() == before
