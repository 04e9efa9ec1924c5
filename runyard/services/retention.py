"""Thread retention: time-to-live on threads, pruning on request, and the expiry sweep."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from datetime import UTC, datetime, timedelta
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver

from runyard.db import threads as threads_db
from runyard.db.engine import Sessions
from runyard.domain.errors import NotFoundError
from runyard.domain.retention import ThreadTTLPolicy
from runyard.domain.thread import ExpiredThread
from runyard.services.threads import ThreadService

log = logging.getLogger("runyard.retention")

# How long a sweeper holds the expired threads it claimed before another may retry them.
CLAIM_HOLD_SECONDS = 300.0
SWEEP_BATCH = 100


class ThreadRetention:
    """Thread retention: pruning on request and the expiry sweep."""

    def __init__(
        self,
        autocommit: Sessions,
        atomic: Callable[[], AbstractAsyncContextManager[Any]],
        checkpointer: BaseCheckpointSaver,
        threads: ThreadService,
    ) -> None:
        self.autocommit = autocommit
        self.atomic = atomic
        self.checkpointer = checkpointer
        self.threads = threads

    async def prune_threads(self, thread_ids: Sequence[str], strategy: str) -> int:
        """Delete the threads, or (`keep_latest`) drop all but their latest checkpoints; returns
        how many existed and were pruned."""
        pruned = 0
        for thread_id in dict.fromkeys(thread_ids):
            if await self._prune_one(thread_id, strategy):
                pruned += 1
        log.info("threads_pruned count=%s strategy=%s", pruned, strategy)
        return pruned

    async def _prune_one(self, thread_id: str, strategy: str) -> bool:
        if strategy == "delete":
            try:
                await self.threads.delete_thread(thread_id)
            except NotFoundError:
                return False
            return True
        async with self.autocommit() as session:
            if await threads_db.get_thread(session, thread_id) is None:
                return False
        await self.checkpointer.aprune([thread_id], strategy="keep_latest")
        return True

    async def sweep_expired_threads(self, policy: ThreadTTLPolicy) -> int:
        """Apply the TTL strategy of every expired idle thread (up to the sweep limit).

        Safe on every instance at once: each expired thread is claimed by one sweeper.
        """
        swept = 0
        while swept < policy.sweep_limit:
            batch = min(SWEEP_BATCH, policy.sweep_limit - swept)
            async with self.atomic() as session:
                claimed = await threads_db.claim_expired_threads(session, batch, CLAIM_HOLD_SECONDS)
            for thread in claimed:
                await self._expire(thread)
            swept += len(claimed)
            if len(claimed) < batch:
                break
        if swept:
            log.info("threads_expired count=%s", swept)
        return swept

    async def _expire(self, thread: ExpiredThread) -> None:
        thread_id = thread.thread_id
        if thread.ttl_strategy == "keep_latest":
            await self.checkpointer.aprune([thread_id], strategy="keep_latest")
            # Kept: it expires again one TTL from now, pruning what it gathers meanwhile.
            expires_at = datetime.now(UTC) + timedelta(minutes=float(thread.ttl_minutes or 0))
            async with self.atomic() as session:
                await threads_db.set_ttl(
                    session, thread_id, "keep_latest", thread.ttl_minutes, expires_at
                )
            log.info("thread_expired thread_id=%s strategy=keep_latest", thread_id)
            return
        try:
            await self.threads.delete_thread(thread_id)
        except NotFoundError:
            return  # deleted meanwhile
        log.info("thread_expired thread_id=%s strategy=delete", thread_id)
