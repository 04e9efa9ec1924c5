"""The instances of one deployment as the cancel bus sees them: a bus and running attempts."""

from __future__ import annotations

import asyncio
import uuid

from redis.asyncio import Redis

from runyard.queue.cancel_bus import CancelBus, InProcessCancelBus
from runyard.queue.redis_bus import NotificationListener, RedisCancelBus
from runyard.streaming.redis_broker import CompletionSignals
from runyard.worker.registry import RunningRuns
from tests.support.redis_keys import REDIS_URL


class Instance:
    """One instance's side of the cancel bus: its bus and the runs executing there."""

    def __init__(self, bus: CancelBus, running: RunningRuns) -> None:
        self.bus = bus
        self.running = running

    def execute(self, run_id: str) -> asyncio.Task[None]:
        """Start executing an attempt of the run here (a task that waits to be stopped)."""
        task = asyncio.create_task(asyncio.sleep(3600), name=f"run-{run_id}")
        self.running.add(run_id, 1, task)
        return task


class CancelBuses:
    """Builds the instances of one deployment; `one_process` when there is only one."""

    def __init__(self, kind: str, redis: Redis | None) -> None:
        self.one_process = kind == "in-process"
        self._redis = redis
        self.prefix = f"contract-{uuid.uuid4().hex[:8]}:"
        self._instances: list[Instance] = []
        self._stop = asyncio.Event()
        self._loops: list[asyncio.Task[None]] = []
        self._clients: list[Redis] = []

    async def instance(self) -> Instance:
        """A new instance, listening for cancels once this returns."""
        running = RunningRuns()
        if self._redis is None:
            assert not self._instances, "in-process there is only one instance"
            instance = Instance(InProcessCancelBus(running.stop), running)
        else:
            channel = f"{self.prefix}cancel"
            blocking = Redis.from_url(REDIS_URL)
            self._clients.append(blocking)
            signals = CompletionSignals(self._redis, f"{self.prefix}done")
            listener = NotificationListener(blocking, channel, running.stop, signals)
            self._loops.append(asyncio.create_task(listener.run_forever(self._stop)))
            await asyncio.wait_for(listener.connected.wait(), 10)
            instance = Instance(RedisCancelBus(self._redis, channel, running.stop), running)
        self._instances.append(instance)
        return instance

    async def close(self) -> None:
        """Stop every run task, bus and listener."""
        for instance in self._instances:
            for entry in instance.running.all():
                entry.task.cancel()
            await instance.bus.close()
        self._stop.set()
        for loop in self._loops:
            loop.cancel()
        await asyncio.gather(*self._loops, return_exceptions=True)
        for client in self._clients:
            await client.aclose()
