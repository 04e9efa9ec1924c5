"""At-most-once tools (`runyard.tools.at_most_once`) when the instance executing a step dies
or freezes, on both backends with real processes: a decorated tool is never called twice
for one tool call, an undecorated one in the same step is called again as before.

The `mailer` graph (graphs/mailer.py) logs every tool call to a file outside the servers;
the tests count the calls there. PostgreSQL: `runyard serve` instances with the default
timings, one replaced after a SIGKILL, or two of which one is frozen (SIGSTOP) past its
lease. SQLite: `runyard dev` on one data folder, restarted after a SIGKILL, or frozen while
a second process on the same folder takes its runs over.
"""

from __future__ import annotations

import asyncio
import signal
import sqlite3
import time
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, Protocol

import pytest
from langgraph_sdk import get_client
from langgraph_sdk.client import LangGraphClient

from tests.chaos.cluster import (
    CHAOS_CONFIG,
    DEFAULT_ENV,
    TERMINAL,
    Cluster,
    ClusterFactory,
    read_log_lines,
    wait_until,
)
from tests.support.server import ServerProcess
from tests.support.throwaway import ThrowawayPostgres

RunRef = tuple[str, str]  # (thread_id, run_id)
# Long enough that a kill lands inside the call; only the first attempt waits it.
INSIDE = 60.0
# A call that waits, on the first attempt, until the test releases it.
HELD = -1.0
OUTAGE = 3.5  # seconds PostgreSQL is down, as tests/chaos/test_postgres_restart.py


class Deployment(Protocol):
    """What the tests do to the servers of one backend."""

    log: Path

    def client(self) -> LangGraphClient:
        """A client of a live server."""
        ...

    async def kill_and_restart(self) -> None:
        """SIGKILL the server executing the runs, and start one in its place."""
        ...

    async def freeze_and_take_over(self, pid: int) -> None:
        """SIGSTOP the server `pid`; another one takes its runs over once it may."""
        ...

    def thaw(self) -> None:
        """SIGCONT the frozen server."""
        ...

    def frozen_log(self) -> str:
        """What the frozen (or thawed) server logged."""
        ...

    def recorded(self, thread_id: str) -> list[tuple[str, str]]:
        """(tool, status) of the thread's recorded tool calls."""
        ...


def _until_stopped(pid: int) -> None:
    """Return once the process is stopped (SIGSTOP is delivered asynchronously)."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        with open(f"/proc/{pid}/stat") as stat:
            if stat.read().rsplit(")", 1)[1].split()[0] == "T":
                return
        time.sleep(0.005)
    raise AssertionError(f"process {pid} did not stop")


def _write_lock_free(database: Path) -> bool:
    """Whether a write transaction can begin on the SQLite file now."""
    connection = sqlite3.connect(database, timeout=0.2)
    try:
        connection.execute("BEGIN IMMEDIATE")
        connection.execute("ROLLBACK")
        return True
    except sqlite3.OperationalError:
        return False
    finally:
        connection.close()


class Serve:
    """`runyard serve` instances on PostgreSQL and Redis, default timings."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.log = cluster.workdir / "calls.log"
        self.frozen: Any = None

    def client(self) -> LangGraphClient:
        return self.cluster.live().client

    async def kill_and_restart(self) -> None:
        victim = self.cluster.instances[0]
        victim.kill()
        await self.cluster.replace(victim)

    async def freeze_and_take_over(self, pid: int) -> None:
        self.frozen = self.cluster.by_pid(pid)
        self.frozen.signal(signal.SIGSTOP)

    def thaw(self) -> None:
        self.frozen.signal(signal.SIGCONT)

    def frozen_log(self) -> str:
        return str(self.frozen.log_tail(200_000))

    def recorded(self, thread_id: str) -> list[tuple[str, str]]:
        rows = self.cluster.sql(
            "SELECT tool, status FROM tool_calls WHERE thread_id = %s ORDER BY tool", thread_id
        )
        return [(str(tool), str(status)) for tool, status in rows]


class Dev:
    """`runyard dev` processes on one SQLite data folder."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.log = workdir / "calls.log"
        self.servers = [self._server().start()]
        self.clients: list[LangGraphClient] = []
        self.frozen: ServerProcess | None = None

    def _server(self) -> ServerProcess:
        return ServerProcess("dev", self.workdir, config=CHAOS_CONFIG)

    def client(self) -> LangGraphClient:
        live = next(s for s in reversed(self.servers) if s is not self.frozen)
        client = get_client(url=live.url, api_key=None, timeout=30)
        self.clients.append(client)
        return client

    async def kill_and_restart(self) -> None:
        victim = self.servers[-1]
        assert victim.process is not None
        victim.process.kill()
        victim.process.wait(timeout=10)
        self.servers.append(await asyncio.to_thread(self._server().start))

    async def freeze_and_take_over(self, pid: int) -> None:
        self.frozen = next(s for s in self.servers if s.process and s.process.pid == pid)
        # Frozen inside the tool, not inside a write: a process stopped while it holds the
        # SQLite file's write lock stops every other process on the file with it (one host,
        # one writer), which is not what this test is about. Freeze again until it holds none.
        database = self.workdir / "data" / "runyard.sqlite"
        for _ in range(100):
            self.frozen.signal(signal.SIGSTOP)
            await asyncio.to_thread(_until_stopped, pid)
            if await asyncio.to_thread(_write_lock_free, database):
                break
            self.frozen.signal(signal.SIGCONT)
            await asyncio.sleep(0.02)
        else:
            pytest.fail("the server held the database's write lock at each of 100 freezes")
        # A process starting on the folder recovers the runs a previous one left running.
        self.servers.append(await asyncio.to_thread(self._server().start))

    def thaw(self) -> None:
        assert self.frozen is not None
        self.frozen.signal(signal.SIGCONT)

    def frozen_log(self) -> str:
        assert self.frozen is not None
        return self.frozen.log_path.read_text(errors="replace")

    def recorded(self, thread_id: str) -> list[tuple[str, str]]:
        with sqlite3.connect(self.workdir / "data" / "runyard.sqlite") as db:
            rows = db.execute(
                "SELECT tool, status FROM tool_calls WHERE thread_id = ? ORDER BY tool",
                (thread_id,),
            ).fetchall()
        return [(str(tool), str(status)) for tool, status in rows]

    async def close(self) -> None:
        for client in self.clients:
            await client.http.client.aclose()
        for server in self.servers:
            if server.process is not None and server.process.poll() is None:
                server.signal(signal.SIGCONT)
                server.process.kill()
                server.process.wait(timeout=10)


Start = Callable[[int], Any]


@pytest.fixture(params=["sqlite", "postgres"])
async def deployments(
    request: pytest.FixtureRequest, cluster_factory: ClusterFactory, tmp_path: Path
) -> AsyncIterator[Start]:
    """Starts the deployment of the backend with `count` servers (SQLite: always one)."""
    made: list[Dev] = []

    async def start(count: int) -> Deployment:
        if request.param == "postgres":
            return Serve(await cluster_factory(count, **DEFAULT_ENV))
        dev = await asyncio.to_thread(Dev, tmp_path)
        made.append(dev)
        return dev

    try:
        yield start
    finally:
        for dev in made:
            await dev.close()


async def submit(deployment: Deployment, calls: dict[str, float], gate: float = 0.0) -> RunRef:
    """A run of the mailer graph on a new thread: the model asks for `calls`."""
    thread_id = str(uuid.uuid4())
    run = await deployment.client().runs.create(
        thread_id,
        "mailer",
        input={"calls": calls, "gate_seconds": gate},
        config={"configurable": {"mailer_log": str(deployment.log)}},
        if_not_exists="create",
    )
    return thread_id, str(run["run_id"])


def calls(deployment: Deployment, run_id: str, tool: str, phase: str = "start") -> list[int]:
    """The attempts of the run that called `tool` (`phase`: reached its gate, or started)."""
    return [
        line["attempt"]
        for line in read_log_lines(deployment.log)
        if line["run_id"] == run_id and line["tool"] == tool and line["phase"] == phase
    ]


async def settled(deployment: Deployment, ref: RunRef, timeout: float = 90) -> dict[str, Any]:
    """The thread once its run ended: its status, interrupts and tool messages."""
    thread_id, run_id = ref

    async def ended() -> bool:
        run = await deployment.client().runs.get(thread_id, run_id)
        return run["status"] in TERMINAL

    await wait_until(ended, timeout, f"run {run_id} to end")
    client = deployment.client()
    run = await client.runs.get(thread_id, run_id)
    thread = await client.threads.get(thread_id)
    state = await client.threads.get_state(thread_id)
    tools = {
        m["name"] or m["tool_call_id"].removeprefix("call-"): m
        for m in state["values"]["messages"]
        if m["type"] == "tool"
    }
    interrupts = [item["value"] for items in thread["interrupts"].values() for item in items]
    return {"run": run["status"], "thread": thread["status"], "tools": tools, "asks": interrupts}


@pytest.mark.slow
@pytest.mark.timeout(240)
async def test_a_killed_step_never_calls_a_decorated_tool_twice(deployments: Start) -> None:
    """SIGKILL with three runs mid-step, then a new server: a call that had returned is
    answered from its record, one that was under way is reported unknown (to the model, or
    to a person by an interrupt), and the undecorated tool beside it runs again."""
    deployment = await deployments(1)
    returned = await submit(deployment, {"send_email": 0.0, "lookup": INSIDE})
    inside = await submit(deployment, {"send_email": INSIDE})
    asking = await submit(deployment, {"charge_card": INSIDE})

    def ready() -> bool:
        return (
            deployment.recorded(returned[0]) == [("send_email", "done")]
            and calls(deployment, returned[1], "lookup") == [1]
            and calls(deployment, inside[1], "send_email") == [1]
            and calls(deployment, asking[1], "charge_card") == [1]
        )

    await wait_until(ready, 60, "every run to be inside its step")
    await deployment.kill_and_restart()

    done = await settled(deployment, returned)
    assert done["run"] == "success", done
    assert calls(deployment, returned[1], "send_email") == [1]
    assert done["tools"]["send_email"]["content"] == "sent to ada@example.com by attempt 1"
    assert calls(deployment, returned[1], "lookup") == [1, 2]
    assert done["tools"]["lookup"]["content"] == "found weather by attempt 2"

    unknown = await settled(deployment, inside)
    assert unknown["run"] == "success", unknown
    assert calls(deployment, inside[1], "send_email") == [1]
    told = unknown["tools"]["send_email"]
    assert told["status"] == "error", told
    assert "send_email (tool call call-send_email) is unknown" in told["content"]

    asked = await settled(deployment, asking)
    assert asked["thread"] == "interrupted", asked
    assert calls(deployment, asking[1], "charge_card") == [1]
    (question,) = asked["asks"]
    assert question["type"] == "tool_outcome_unknown"
    assert (question["tool"], question["tool_call_id"]) == ("charge_card", "call-charge_card")

    # A person checked the card and answers: the answer is the call's result, not a call.
    thread_id = asking[0]
    answer = {"action": "return", "result": "charged once, checked by hand"}
    run = await deployment.client().runs.create(
        thread_id,
        "mailer",
        command={"resume": answer},
        config={"configurable": {"mailer_log": str(deployment.log)}},
    )
    answered = await settled(deployment, (thread_id, str(run["run_id"])))
    assert answered["run"] == "success", answered
    assert answered["tools"]["charge_card"]["content"] == "charged once, checked by hand"
    assert calls(deployment, str(run["run_id"]), "charge_card") == []
    assert calls(deployment, asking[1], "charge_card") == [1]


@pytest.mark.slow
@pytest.mark.timeout(240)
async def test_a_frozen_attempt_that_wakes_does_not_call_the_tool_again(
    deployments: Start,
) -> None:
    """The server executing a step is frozen just before the decorated call, another takes
    the run over and makes the call; the frozen one wakes, goes on into the tool, and is
    refused: the tool was called once."""
    deployment = await deployments(2)
    thread_id, run_id = await submit(deployment, {"send_email": 0.0}, gate=8.0)
    await wait_until(
        lambda: calls(deployment, run_id, "send_email", "gate") == [1],
        60,
        "the first attempt to reach the tool",
        interval=0.05,
    )
    (gate,) = [line for line in read_log_lines(deployment.log) if line["phase"] == "gate"]
    await deployment.freeze_and_take_over(gate["pid"])
    taken = await settled(deployment, (thread_id, run_id), timeout=120)
    assert taken["run"] == "success", taken
    assert calls(deployment, run_id, "send_email") == [2]

    deployment.thaw()
    stood_down = f"run_stood_down run_id={run_id} attempt=1"
    await wait_until(
        lambda: stood_down in deployment.frozen_log(), 30, "the woken attempt to stand down"
    )
    assert calls(deployment, run_id, "send_email") == [2]
    assert deployment.recorded(thread_id) == [("send_email", "done")]
    final = await settled(deployment, (thread_id, run_id))
    assert final["tools"]["send_email"]["content"] == "sent to ada@example.com by attempt 2"


@pytest.mark.slow
@pytest.mark.timeout(180)
async def test_a_postgres_restart_during_a_call_loses_no_record(
    cluster_factory: ClusterFactory, throwaway_postgres: ThrowawayPostgres
) -> None:
    """PostgreSQL stops while a decorated tool runs, and the tool returns during the outage:
    its result is written once the database answers again, as a checkpoint would be, the
    run ends in the same attempt, and the tool was called once."""
    cluster = await cluster_factory(1, postgres=throwaway_postgres, **DEFAULT_ENV)
    deployment = Serve(cluster)
    thread_id, run_id = await submit(deployment, {"send_email": HELD})
    await wait_until(
        lambda: calls(deployment, run_id, "send_email") == [1], 60, "the call to start"
    )
    await asyncio.to_thread(throwaway_postgres.stop)
    Path(str(deployment.log) + ".release").touch()
    await wait_until(
        lambda: calls(deployment, run_id, "send_email", "done") == [1], 30, "the call to return"
    )
    await asyncio.sleep(OUTAGE)
    await asyncio.to_thread(throwaway_postgres.start)

    final = await settled(deployment, (thread_id, run_id))
    assert final["run"] == "success", final
    assert final["tools"]["send_email"]["content"] == "sent to ada@example.com by attempt 1"
    assert calls(deployment, run_id, "send_email") == [1]
    assert deployment.recorded(thread_id) == [("send_email", "done")]
    log = cluster.instances[0].log_tail(200_000)
    assert f"tool_call_store_unavailable_retrying run_id={run_id}" in log
