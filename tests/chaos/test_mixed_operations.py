"""Mixed operations from many clients at once on a few threads, checked against the promises.

Eight clients send 200 operations between them, chosen by a seeded random generator: run
creates under every multitask strategy, cancels (interrupt and rollback), run deletes,
joins and thread deletes, on three threads, against `runyard dev` and against two `runyard
serve` instances (PostgreSQL + Redis, default timings). The `tally` graph's three nodes
each append `run_id:node` to the thread's values. Afterwards:

- every run answered 2xx is accounted for: ended (`success` or `interrupted`), or gone
  only where a delete, a rollback or its thread's delete could have removed it;
- no join answered before its run ended;
- no run ended `success` after a cancel answered as though it stopped it;
- no two runs of a thread overlapped, and the thread's values are exactly what its runs
  wrote: each run's marks are one unbroken prefix of a, b, c, complete for a successful run.
"""

from __future__ import annotations

import asyncio
import itertools
import random
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.chaos.cluster import CHAOS_CONFIG, DEFAULT_ENV, ClusterFactory, wait_until
from tests.support.server import ServerProcess

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

SEEDS = (1, 2, 3)
OPERATIONS = 200
CLIENTS = 8
THREADS = 3
NODES = ("a", "b", "c")
STRATEGIES = ("enqueue", "reject", "interrupt", "rollback")
ENDED = {"success", "interrupted"}
# What each client does, with weights: mostly creates, so threads stay busy.
MOVES = {"create": 45, "cancel": 20, "join": 15, "delete_run": 10, "delete_thread": 4, "get": 6}


@dataclass
class Created:
    """A run answered 2xx: its thread and when its create was sent."""

    thread_id: str
    sent: int


@dataclass
class History:
    """What the clients were answered, in the order of one shared counter."""

    clock: Iterator[int] = field(default_factory=itertools.count)
    runs: dict[str, Created] = field(default_factory=dict)
    # (thread id, when answered) of each operation that may remove a run of that thread.
    removals: list[tuple[str, int]] = field(default_factory=list)
    # Runs a cancel answered for as though it stopped them.
    cancelled: set[str] = field(default_factory=set)
    problems: list[str] = field(default_factory=list)

    def tick(self) -> int:
        """The next moment of the shared clock."""
        return next(self.clock)

    def may_be_gone(self, run_id: str) -> bool:
        """A removal on the run's thread was answered after the run's create was sent."""
        run = self.runs[run_id]
        return any(t == run.thread_id and at > run.sent for t, at in self.removals)


class Client:
    """One client: its own generator, its own connections to every instance."""

    def __init__(self, urls: list[str], seed: int, threads: list[str], history: History):
        self._random = random.Random(seed)
        self._http = [httpx.AsyncClient(base_url=url, timeout=60) for url in urls]
        self._threads = threads
        self._history = history

    async def close(self) -> None:
        """Close its connections."""
        for http in self._http:
            await http.aclose()

    def _pick_run(self) -> tuple[str, str] | None:
        known = list(self._history.runs.items())
        if not known:
            return None
        run_id, run = self._random.choice(known)
        return run.thread_id, run_id

    async def move(self) -> None:
        """One operation, chosen at random, and what its answer says."""
        http = self._random.choice(self._http)
        move = self._random.choices(list(MOVES), weights=list(MOVES.values()))[0]
        if move == "create":
            await self._create(http)
            return
        picked = self._pick_run()
        if picked is None or move == "delete_thread":
            await self._delete_thread(http, self._random.choice(self._threads))
            return
        thread_id, run_id = picked
        if move == "cancel":
            await self._cancel(http, thread_id, run_id)
        elif move == "join":
            await self._join(http, thread_id, run_id)
        elif move == "delete_run":
            await self._delete_run(http, thread_id, run_id)
        else:
            await self._expect(http.get(f"/threads/{thread_id}/runs/{run_id}"), {200, 404})

    async def _expect(self, request: Any, allowed: set[int]) -> httpx.Response:
        response: httpx.Response = await request
        if response.status_code not in allowed:
            self._history.problems.append(
                f"{response.request.method} {response.request.url.path} answered "
                f"{response.status_code}: {response.text[:300]}"
            )
        return response

    async def _create(self, http: httpx.AsyncClient) -> None:
        thread_id = self._random.choice(self._threads)
        strategy = self._random.choice(STRATEGIES)
        body = {
            "assistant_id": "tally",
            "input": {"delay": self._random.choice((0.005, 0.02, 0.05))},
            "multitask_strategy": strategy,
            "if_not_exists": "create",
        }
        sent = self._history.tick()
        response = await self._expect(
            http.post(f"/threads/{thread_id}/runs", json=body), {200, 409}
        )
        if response.status_code == 200:
            self._history.runs[response.json()["run_id"]] = Created(thread_id, sent)
            if strategy == "rollback":
                self._history.removals.append((thread_id, self._history.tick()))

    async def _cancel(self, http: httpx.AsyncClient, thread_id: str, run_id: str) -> None:
        action = self._random.choice(("interrupt", "rollback"))
        response = await self._expect(
            http.post(f"/threads/{thread_id}/runs/{run_id}/cancel", params={"action": action}),
            {202, 404, 409},
        )
        if response.status_code == 202:
            self._history.cancelled.add(run_id)
            if action == "rollback":
                self._history.removals.append((thread_id, self._history.tick()))

    async def _join(self, http: httpx.AsyncClient, thread_id: str, run_id: str) -> None:
        joined = await self._expect(
            http.get(f"/threads/{thread_id}/runs/{run_id}/join"), {200, 404}
        )
        if joined.status_code != 200:
            return
        run = await http.get(f"/threads/{thread_id}/runs/{run_id}")
        if run.status_code == 200 and run.json()["status"] not in ENDED:
            self._history.problems.append(
                f"join of {run_id} answered while the run was {run.json()['status']}"
            )

    async def _delete_run(self, http: httpx.AsyncClient, thread_id: str, run_id: str) -> None:
        response = await self._expect(
            http.delete(f"/threads/{thread_id}/runs/{run_id}"), {204, 404}
        )
        if response.status_code == 204:
            self._history.removals.append((thread_id, self._history.tick()))

    async def _delete_thread(self, http: httpx.AsyncClient, thread_id: str) -> None:
        response = await self._expect(http.delete(f"/threads/{thread_id}"), {204, 404})
        if response.status_code == 204:
            self._history.removals.append((thread_id, self._history.tick()))


async def _workload(urls: list[str], seed: int) -> tuple[History, list[str]]:
    history = History()
    threads = [str(uuid.uuid4()) for _ in range(THREADS)]
    clients = [Client(urls, seed * 100 + n, threads, history) for n in range(CLIENTS)]
    budget = iter(range(OPERATIONS))

    async def drive(client: Client) -> None:
        for _ in budget:
            await client.move()

    try:
        await asyncio.gather(*(drive(client) for client in clients))
    finally:
        for client in clients:
            await client.close()
    return history, threads


async def _settled(http: httpx.AsyncClient, threads: list[str]) -> None:
    """Every remaining run of the threads has ended."""

    async def no_active_run() -> bool:
        for thread_id in threads:
            response = await http.get(f"/threads/{thread_id}/runs", params={"limit": 1000})
            if response.status_code == 200 and any(
                run["status"] in ("pending", "running") for run in response.json()
            ):
                return False
        return True

    await wait_until(no_active_run, 120, "every run to end")


def _segments(marks: list[str]) -> list[tuple[str, list[str]]]:
    """The marks as (run id, its nodes) runs of consecutive marks of one run."""
    segments: list[tuple[str, list[str]]] = []
    for entry in marks:
        run_id, node = entry.rsplit(":", 1)
        if segments and segments[-1][0] == run_id:
            segments[-1][1].append(node)
        else:
            segments.append((run_id, [node]))
    return segments


async def _check(http: httpx.AsyncClient, history: History, threads: list[str]) -> list[str]:
    problems = list(history.problems)
    statuses: dict[str, str | None] = {}
    for run_id, run in history.runs.items():
        response = await http.get(f"/threads/{run.thread_id}/runs/{run_id}")
        if response.status_code == 404:
            statuses[run_id] = None
            if not history.may_be_gone(run_id):
                problems.append(f"run {run_id} was accepted and is gone, though nothing removed it")
            continue
        status = response.json()["status"]
        statuses[run_id] = status
        if status not in ENDED:
            problems.append(f"run {run_id} ended {status}")
        if status == "success" and run_id in history.cancelled:
            problems.append(f"run {run_id} ended success after a cancel answered for it")
    for thread_id in threads:
        response = await http.get(f"/threads/{thread_id}")
        if response.status_code == 404:
            continue
        thread = response.json()
        if thread["status"] == "busy":
            problems.append(f"thread {thread_id} is busy with no active run")
        segments = _segments(list((thread["values"] or {}).get("marks", [])))
        seen: set[str] = set()
        for run_id, nodes in segments:
            if run_id in seen:
                problems.append(f"run {run_id}'s marks are interleaved with another run's")
            seen.add(run_id)
            if nodes != list(NODES[: len(nodes)]):
                problems.append(f"run {run_id} wrote {nodes}, not a prefix of {list(NODES)}")
            status = statuses.get(run_id, "unknown")
            if status == "success" and nodes != list(NODES):
                problems.append(f"successful run {run_id} wrote only {nodes}")
        listed = await http.get(f"/threads/{thread_id}/runs", params={"limit": 1000})
        for run in listed.json():
            if run["status"] == "success" and run["run_id"] not in seen:
                problems.append(f"successful run {run['run_id']} left nothing in its thread")
    return problems


async def _run_seeds(urls: list[str]) -> None:
    async with httpx.AsyncClient(base_url=urls[0], timeout=60) as http:
        for seed in SEEDS:
            history, threads = await _workload(urls, seed)
            await _settled(http, threads)
            problems = await _check(http, history, threads)
            assert not problems, f"seed {seed}: " + "\n".join(problems[:20])
            assert len(history.runs) > OPERATIONS // 5, "the workload created too few runs"


async def test_mixed_operations_on_runyard_dev(tmp_path: Path) -> None:
    server = ServerProcess("dev", tmp_path, config=CHAOS_CONFIG)
    await asyncio.to_thread(server.start)
    try:
        await _run_seeds([server.url])
    finally:
        await asyncio.to_thread(server.stop)


async def test_mixed_operations_on_two_instances(cluster_factory: ClusterFactory) -> None:
    cluster = await cluster_factory(2, **DEFAULT_ENV)
    await _run_seeds([instance.url for instance in cluster.instances])
