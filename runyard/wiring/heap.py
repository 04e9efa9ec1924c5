"""Keeping the cyclic garbage collector off what lives as long as the runtime."""

from __future__ import annotations

import gc
from contextlib import AsyncExitStack

# Young-generation threshold of the cyclic garbage collector once started (Python's: 700).
GC_YOUNG_THRESHOLD = 7000


def settle_heap(stack: AsyncExitStack) -> None:
    """Freeze what is alive once started and collect the young generation less often;
    `stack` undoes both.

    What is alive once started (modules, graphs, prebuilt statements, pools) is frozen,
    so full collections stop re-scanning it, and young collections run every
    GC_YOUNG_THRESHOLD net allocations instead of 700. Under the throughput bench the
    collector went from about 5% of an instance's CPU to under 1%.
    """
    gc.collect()
    gc.freeze()
    young, middle, old = gc.get_threshold()
    gc.set_threshold(max(young, GC_YOUNG_THRESHOLD), middle, old)

    def undo() -> None:
        gc.set_threshold(young, middle, old)
        gc.unfreeze()

    stack.callback(undo)
