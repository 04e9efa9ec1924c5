"""Calls into the server's event loop from the threads LangGraph runs synchronous code on."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def from_thread(call: Coroutine[Any, Any, T], loop: asyncio.AbstractEventLoop, refusal: str) -> T:
    """`call`'s result, run on `loop` from another thread; on `loop` itself, where waiting
    for it would block it forever, `call` is dropped and InvalidStateError says `refusal`."""
    try:
        on_loop = asyncio.get_running_loop() is loop
    except RuntimeError:
        on_loop = False
    if on_loop:
        call.close()
        raise asyncio.InvalidStateError(refusal)
    return asyncio.run_coroutine_threadsafe(call, loop).result()
