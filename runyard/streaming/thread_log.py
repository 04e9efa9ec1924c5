"""A thread's own event log in the broker: the state updates its thread streams deliver."""

from __future__ import annotations

import json
import logging
from typing import Any

from runyard.streaming.broker import EventBroker

log = logging.getLogger("runyard.threads")


def state_log(thread_id: str) -> str:
    """The broker log that carries a thread's state updates."""
    return f"thread-state:{thread_id}"


async def publish_state_update(broker: EventBroker, thread_id: str, state: dict[str, Any]) -> None:
    """Tell the thread's streams its state was updated (best effort: the update is stored)."""
    data = json.dumps({"state": state, "thread_id": thread_id}, ensure_ascii=False, default=str)
    try:
        await broker.publish(state_log(thread_id), "state_update", data)
    except Exception:
        log.warning("thread_state_update_unpublished thread_id=%s", thread_id, exc_info=True)
