"""At-most-once tool calls against the real records, on PostgreSQL and SQLite, in process:
the attempts of a run are claimed and taken over in the database as workers do, and each
attempt runs LangGraph's ToolNode with the attempt's book (runyard/graphs/tool_calls.py).

The killed and frozen servers are in tests/chaos/test_at_most_once_tools.py; here are the
cases that need no process to die: the sync and BaseTool forms, an attempt that lost its
run, the answers to the interrupt, a tool's own interrupt, the bound on a result, the
encryption of results, and their deletion with the thread.
"""

from __future__ import annotations

import asyncio
import operator
import sqlite3
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import pytest
from langchain_core.messages import AIMessage, AnyMessage, ToolMessage
from langchain_core.tools import BaseTool, StructuredTool, tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode
from langgraph.types import Command, interrupt
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine
from typing_extensions import TypedDict

from runyard.db import run_attempts as attempts_db
from runyard.db import run_claims as claims_db
from runyard.db import runs as runs_db
from runyard.db import threads as threads_db
from runyard.db.engine import json_dumps, json_loads, session_factory
from runyard.db.tables import tool_calls
from runyard.domain.errors import InvalidInputError, StaleAttemptError
from runyard.domain.status import RunStatus
from runyard.domain.tool_calls import Finished, Started, ToolCallKey, use_book
from runyard.encryption.at_rest import AtRest, at_rest
from runyard.encryption.rotation import Reencryption
from runyard.graphs.tool_calls import AttemptToolCalls, ToolCallRecords
from runyard.tools import at_most_once, idempotency_key
from tests.support.databases import migrated_engine
from tests.support.rows import run_row, thread_row

pytestmark = [pytest.mark.timeout(60), pytest.mark.parametrize("kind", ["sqlite", "postgres"])]

SECRET = "card-4242-secret-result"
OLD_KEY = b"0123456789abcdef0123456789abcdef"
NEW_KEY = b"fedcba9876543210"


class Crash(BaseException):
    """The process dying mid-step: nothing after it runs, nothing of the step is saved."""


class State(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]
    crash: bool
    log: Annotated[list[str], operator.add]


@dataclass
class Calls:
    """What the tools did, seen from outside them."""

    made: list[str] = field(default_factory=list)
    keys: dict[str, list[str]] = field(default_factory=dict)
    recorded: asyncio.Event = field(default_factory=asyncio.Event)
    crashed: bool = False

    def note(self, name: str) -> None:
        self.made.append(name)
        self.keys.setdefault(name, []).append(idempotency_key())


def make_tools(calls: Calls) -> list[BaseTool]:
    """An async and a sync decorated function, a decorated BaseTool, and an undecorated one."""

    @tool
    @at_most_once
    async def send_email(to: str) -> str:
        """Send an e-mail."""
        calls.note("send_email")
        return f"sent to {to}"

    @tool
    @at_most_once
    def file_ticket(title: str) -> dict[str, Any]:
        """File a ticket (synchronous)."""
        calls.note("file_ticket")
        return {"ticket": 7, "title": title}

    def notify(channel: str) -> str:
        calls.note("notify")
        return f"notified {channel}"

    notifier = at_most_once(StructuredTool.from_function(notify, description="Notify."))

    @tool
    async def lookup(query: str) -> str:
        """Look something up (not marked)."""
        calls.made.append("lookup")
        return f"found {query}"

    return [send_email, file_ticket, notifier, lookup]


CALLS = [
    {"id": "c-mail", "name": "send_email", "args": {"to": "ada@example.com"}},
    {"id": "c-ticket", "name": "file_ticket", "args": {"title": "broken"}},
    {"id": "c-notify", "name": "notify", "args": {"channel": "ops"}},
    {"id": "c-lookup", "name": "lookup", "args": {"query": "weather"}},
]


def agent_graph(
    tools: list[BaseTool], calls: list[dict[str, Any]], crash_after: Calls | None
) -> Any:
    """model → tools → END; with `crash_after`, the step's first attempt dies once every
    marked call of it recorded its result (the process killed before the step is saved)."""

    def model(state: State) -> dict[str, Any]:
        return {"messages": [AIMessage(content="", tool_calls=calls)]}

    async def crash(request: Any, execute: Callable[[Any], Any]) -> Any:
        answer = await execute(request)
        if crash_after is not None and request.tool_call["name"] == "lookup":
            if not crash_after.crashed:
                crash_after.crashed = True
                await crash_after.recorded.wait()
                raise Crash()
        return answer

    builder = StateGraph(State)
    builder.add_node("model", model)
    builder.add_node("tools", ToolNode(tools, awrap_tool_call=crash))
    builder.add_edge(START, "model")
    builder.add_edge("model", "tools")
    builder.add_edge("tools", END)
    return builder.compile(checkpointer=InMemorySaver())


class Run:
    """A run of a thread in the database, its attempts claimed as workers claim them."""

    def __init__(self, engine: AsyncEngine, records: ToolCallRecords) -> None:
        self.engine = engine
        self.records = records
        self.thread_id = str(uuid.uuid4())
        self.run_id = str(uuid.uuid4())
        self.attempt = 0

    async def create(self) -> Run:
        async with self.engine.begin() as session:
            await threads_db.insert_thread(session, thread_row(self.thread_id))
            await runs_db.insert_run(session, run_row(self.run_id, self.thread_id))
        return self

    async def next_attempt(self) -> AttemptToolCalls:
        """Hand the run back if an attempt holds it, claim it again: the next attempt's book."""
        async with self.engine.begin() as session:
            if self.attempt:
                assert await attempts_db.release_run(session, self.run_id, self.attempt)
            claimed = await claims_db.claim_run(session, self.run_id, "instance", 30)
        assert claimed is not None
        self.attempt = claimed.run.attempt
        return self.records.for_attempt(self.run_id, self.attempt, self.thread_id)

    async def finish(self) -> None:
        """End the run as its attempt would (an interrupted run ends `success`)."""
        async with self.engine.begin() as session:
            assert await attempts_db.finish_run(
                session, self.run_id, self.attempt, RunStatus.SUCCESS, None, None
            )

    async def on_same_thread(self) -> Run:
        """A new run of the same thread (the one that answers an interrupt)."""
        other = Run(self.engine, self.records)
        other.thread_id = self.thread_id
        async with self.engine.begin() as session:
            await runs_db.insert_run(session, run_row(other.run_id, self.thread_id))
        return other

    def config(self) -> dict[str, Any]:
        return {"configurable": {"thread_id": self.thread_id}}

    async def rows(self) -> list[dict[str, Any]]:
        async with self.engine.connect() as session:
            found = await session.execute(
                select(tool_calls).where(tool_calls.c.thread_id == self.thread_id)
            )
            return [dict(row) for row in found.mappings()]


class Hooked(AttemptToolCalls):
    """The book of the run's attempt in hand, saying when `expected` calls have recorded
    their results."""

    def __init__(self, run: Run, calls: Calls, expected: int) -> None:
        super().__init__(run.records, run.run_id, run.attempt, run.thread_id)
        self.calls = calls
        self.expected = expected

    async def finish(self, key: ToolCallKey, result: Any) -> None:
        await super().finish(key, result)
        self.expected -= 1
        if self.expected == 0:
            self.calls.recorded.set()


@asynccontextmanager
async def storage(
    kind: str, tmp_path: Path, serde: SerializerProtocol | None = None, max_bytes: int = 1 << 20
) -> AsyncIterator[tuple[AsyncEngine, ToolCallRecords]]:
    async with migrated_engine(kind, tmp_path) as engine:
        sessions = session_factory(engine, autocommit=True)
        yield engine, ToolCallRecords(sessions, serde or JsonPlusSerializer(), max_bytes, 2.0)


async def step(graph: Any, run: Run, book: AttemptToolCalls, graph_input: Any) -> Any:
    """One attempt at the graph, in a task of its own (as a worker runs each attempt)."""

    async def attempt() -> Any:
        use_book(book)
        return await graph.ainvoke(graph_input, run.config())

    return await asyncio.create_task(attempt())


def tool_messages(state: dict[str, Any]) -> dict[str, ToolMessage]:
    return {m.tool_call_id: m for m in state["messages"] if isinstance(m, ToolMessage)}


async def test_marked_calls_are_answered_from_their_records_after_a_crash(
    kind: str, tmp_path: Path
) -> None:
    """The step dies after its calls returned: the next attempt calls the undecorated tool
    again and answers the three marked ones (async, sync, BaseTool) from their records."""
    async with storage(kind, tmp_path) as (engine, records):
        run = await Run(engine, records).create()
        calls = Calls()
        graph = agent_graph(make_tools(calls), CALLS, crash_after=calls)
        await run.next_attempt()
        hooked = Hooked(run, calls, expected=3)
        with pytest.raises(Crash):
            await step(graph, run, hooked, {"messages": []})
        assert sorted(calls.made) == ["file_ticket", "lookup", "notify", "send_email"]
        assert {row["status"] for row in await run.rows()} == {"done"}

        second = await run.next_attempt()
        state = await step(graph, run, second, None)
        assert sorted(calls.made) == ["file_ticket", "lookup", "lookup", "notify", "send_email"]
        answers = tool_messages(state)
        assert answers["c-mail"].content == "sent to ada@example.com"
        assert answers["c-ticket"].content == '{"ticket": 7, "title": "broken"}'
        assert (answers["c-notify"].content, answers["c-notify"].name) == ("notified ops", "notify")
        assert all(m.status == "success" for m in answers.values())


async def test_an_attempt_that_lost_its_run_calls_nothing(kind: str, tmp_path: Path) -> None:
    """Attempt 1 reaches the tools after attempt 2 took the run: its intent is refused in
    the statement that would record it, and no marked tool is called."""
    async with storage(kind, tmp_path) as (engine, records):
        run = await Run(engine, records).create()
        calls = Calls()
        # One call: ToolNode does not stop the others of a step when one raises.
        graph = agent_graph(make_tools(calls)[:1], CALLS[:1], crash_after=None)
        stale = await run.next_attempt()
        await run.next_attempt()
        with pytest.raises(StaleAttemptError, match=f"attempt 1 of run {run.run_id}"):
            await step(graph, run, stale, {"messages": []})
        assert calls.made == []
        assert await run.rows() == []


def charging(made: list[str]) -> BaseTool:
    """A card charge that interrupts on an unknown outcome; its first call dies inside it."""

    @tool
    @at_most_once(on_unknown="interrupt")
    async def charge(amount: int) -> str:
        """Charge a card."""
        made.append(idempotency_key())
        if len(made) == 1:
            raise Crash()
        return f"charged {amount}"

    return charge


ANSWERS: list[tuple[dict[str, Any], str | None]] = [
    ({"action": "call"}, "charged 5"),
    ({"action": "return", "result": "charged by hand"}, "charged by hand"),
    ({"action": "error"}, "is unknown"),
    ({"action": "maybe"}, None),
]


async def test_the_interrupt_asks_and_each_answer_is_kept(kind: str, tmp_path: Path) -> None:
    """A call the lost attempt started stops the run for a person; the run that answers
    does as told: `call` makes it again under the same idempotency key, `return` records
    the person's result, `error` tells the model, anything else is refused."""
    async with storage(kind, tmp_path) as (engine, records):
        for answer, expected in ANSWERS:
            made: list[str] = []
            call = {"id": "c-charge", "name": "charge", "args": {"amount": 5}}
            graph = agent_graph([charging(made)], [call], crash_after=None)
            run = await Run(engine, records).create()
            with pytest.raises(Crash):
                await step(graph, run, await run.next_attempt(), {"messages": []})
            asked = await step(graph, run, await run.next_attempt(), None)
            (question,) = asked["__interrupt__"]
            assert (question.value["tool"], question.value["tool_call_id"]) == call_of(call)
            assert question.value["idempotency_key"] == made[0]
            await run.finish()

            answering = await run.on_same_thread()
            book = await answering.next_attempt()
            if expected is None:
                with pytest.raises(InvalidInputError, match='"action": "call"'):
                    await step(graph, answering, book, Command(resume=answer))
                continue
            done = await step(graph, answering, book, Command(resume=answer))
            assert expected in str(tool_messages(done)["c-charge"].content), answer
            assert made == [made[0]] * (2 if answer["action"] == "call" else 1), answer


def call_of(call: dict[str, Any]) -> tuple[str, str]:
    return call["name"], call["id"]


async def test_a_tools_own_interrupt_leaves_no_intent_behind(kind: str, tmp_path: Path) -> None:
    """A marked tool that asks for approval itself (`interrupt()` before its effect) runs
    again in the run that answers, as LangGraph runs it, and makes its effect once."""
    async with storage(kind, tmp_path) as (engine, records):
        made: list[str] = []

        @tool
        @at_most_once
        async def wire(amount: int) -> str:
            """Wire money, once approved."""
            approval = interrupt({"approve": amount})
            made.append(approval)
            return f"wired {amount}: {approval}"

        call = {"id": "c-wire", "name": "wire", "args": {"amount": 9}}
        graph = agent_graph([wire], [call], crash_after=None)
        run = await Run(engine, records).create()
        asked = await step(graph, run, await run.next_attempt(), {"messages": []})
        assert asked["__interrupt__"][0].value == {"approve": 9}
        assert await run.rows() == []
        await run.finish()
        answering = await run.on_same_thread()
        done = await step(graph, answering, await answering.next_attempt(), Command(resume="yes"))
        assert tool_messages(done)["c-wire"].content == "wired 9: yes"
        assert made == ["yes"]
        assert [row["status"] for row in await run.rows()] == ["done"]


async def test_a_result_too_large_to_keep_is_not_replayed(kind: str, tmp_path: Path) -> None:
    """Over RUNYARD_MAX_TOOL_RESULT_BYTES only the size is kept: the call is not made again,
    and the model is told why its result is missing."""
    async with storage(kind, tmp_path, max_bytes=1024) as (engine, records):
        calls = Calls()
        made: list[int] = []

        @tool
        @at_most_once
        async def export(rows: int) -> str:
            """Export rows."""
            made.append(rows)
            return "x" * 5000

        @tool
        async def lookup(query: str) -> str:
            """Not marked."""
            return query

        graph = agent_graph(
            [export, lookup],
            [
                {"id": "c-export", "name": "export", "args": {"rows": 3}},
                {"id": "c-lookup", "name": "lookup", "args": {"query": "q"}},
            ],
            crash_after=calls,
        )
        run = await Run(engine, records).create()
        await run.next_attempt()
        hooked = Hooked(run, calls, expected=1)
        with pytest.raises(Crash):
            await step(graph, run, hooked, {"messages": []})
        (row,) = await run.rows()
        assert row["result"] is None and row["result_bytes"] > 5000
        state = await step(graph, run, await run.next_attempt(), None)
        message = tool_messages(state)["c-export"]
        assert message.status == "error"
        assert "larger than RUNYARD_MAX_TOOL_RESULT_BYTES (1024)" in message.content
        assert made == [3]


def aes(key: bytes, *previous: bytes) -> AtRest:
    """LANGGRAPH_AES_KEY `key`, with `previous` keys that only decrypt."""
    found = at_rest(key, list(previous), [], json_dumps, json_loads)
    assert found is not None
    return found


async def test_results_are_encrypted_at_rest_rotate_and_go_with_their_thread(
    kind: str, tmp_path: Path
) -> None:
    """Under LANGGRAPH_AES_KEY a result is stored as a checkpoint value is (encrypted, its
    cipher in its type); `runyard reencrypt` moves it under a new key, which alone reads it
    back; deleting the thread deletes its records."""
    async with storage(kind, tmp_path, serde=aes(OLD_KEY).serde()) as (engine, records):
        run = await Run(engine, records).create()
        book = await run.next_attempt()
        key = ToolCallKey(run.thread_id, "tools:task", "c-1", "charge")
        assert isinstance(await book.begin(key), Started)
        await book.finish(key, {"receipt": SECRET})
        (row,) = await run.rows()
        assert row["result_type"] == "msgpack+aes-gcm"
        assert SECRET.encode() not in bytes(row["result"])

        url = engine.url.render_as_string(hide_password=False)
        for database in ("checkpoints", "store"):  # a dev deployment's other files
            sqlite3.connect(tmp_path / f"{database}.sqlite").close()
        rotation = Reencryption(aes(NEW_KEY, OLD_KEY), url, tmp_path, report=lambda _: None)
        assert (await rotation.run()).by_table == {"tool_calls": 1}
        records.serde = aes(NEW_KEY).serde()
        found = await (await run.next_attempt()).begin(key)
        assert found == Finished({"receipt": SECRET}, size=found.size)

        async with engine.begin() as session:
            await threads_db.delete_thread(session, run.thread_id)
        assert await run.rows() == []
