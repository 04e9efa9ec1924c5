"""Custom encryption (`encryption.path`) on real servers in both modes, the tables read
directly.

The project (tests/graphs/encryption_project) is written for LangGraph's server and uses
only `langgraph_sdk.Encryption`: a context handler derives a key id per tenant from the
authenticated user; blob and JSON handlers encrypt under that tenant's key. Compared
against langgraph-api 0.16.7 (`langgraph_api/encryption/`): the handlers are called with
`EncryptionContext(model, field, metadata)`, the context is stored beside the data
(`__encryption_context__`), and a JSON encryptor that changes the keys is refused.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from langgraph_sdk import get_client

from tests.support.databases import create_migrated_database, drop_database, postgres_available
from tests.support.server import ROOT, ServerProcess

pytestmark = pytest.mark.timeout(240)

PROJECT = ROOT / "tests" / "graphs" / "encryption_project"
SECRETS = {"user-a": "tell-no-one-a-5c1e", "user-b": "tell-no-one-b-93d0"}
SECRET_METADATA = {"user-a": "sk-meta-a-71f2", "user-b": "sk-meta-b-0be4"}
SECRET_RUN = {"user-a": "sk-run-a-4d09", "user-b": "sk-run-b-e6a7"}
SECRET_ASSISTANT = {"user-a": "sk-asst-a-2f80", "user-b": "sk-asst-b-91c3"}
SECRET_STORE = {"user-a": "sk-store-a-6a1d", "user-b": "sk-store-b-d4e2"}
SECRET_CRON = {"user-a": "sk-cron-a-77b1", "user-b": "sk-cron-b-3e5c"}
JSON_SECRETS = [
    *SECRET_METADATA.values(),
    *SECRET_RUN.values(),
    *SECRET_ASSISTANT.values(),
    *SECRET_STORE.values(),
    *SECRET_CRON.values(),
]
PLAIN = "visible-note-8c4d"


class Deployment:
    """A SQLite folder or a PostgreSQL database, served with one project config."""

    def __init__(self, backend: str, workdir: Path, database_url: str | None) -> None:
        self.backend = backend
        self.workdir = workdir
        self.database_url = database_url

    @contextmanager
    def server(self, config: str = "langgraph.json") -> Iterator[ServerProcess]:
        mode = "dev" if self.backend == "sqlite" else "serve"
        env = {"RUNYARD_DATA_DIR": str(self.workdir / "data")}
        if self.database_url:
            env.update({"DATABASE_URL": self.database_url, "REDIS_URL": ""})
        proc = ServerProcess(mode, self.workdir, env=env, config=PROJECT / config).start()
        try:
            yield proc
        finally:
            proc.stop()

    def checkpoint_bytes(self) -> bytes:
        """Every stored checkpoint, blob and pending write."""
        if self.database_url is None:
            data = self.workdir / "data"
            return b"".join(p.read_bytes() for p in sorted(data.rglob("checkpoints.sqlite*")))
        return self._tables("checkpoints", "checkpoint_blobs", "checkpoint_writes")

    def json_bytes(self) -> bytes:
        """Everything stored but the checkpoints: threads, runs, assistants, the store..."""
        data = self.workdir / "data"
        if self.database_url is None:
            files = [p for p in sorted(data.rglob("*.sqlite*")) if "checkpoints" not in p.name]
            return b"".join(p.read_bytes() for p in files)
        with psycopg.connect(self.database_url) as conn:
            tables = [
                t
                for (t,) in conn.execute(
                    "SELECT tablename FROM pg_tables WHERE schemaname = 'public'"
                )
                if not t.startswith("checkpoint")
            ]
        return self._tables(*tables)

    def column_text(self, table: str, column: str) -> str:
        """Every stored value of one JSON column, as text."""
        query = f'SELECT CAST("{column}" AS text) FROM {table}'
        if self.database_url is None:
            import sqlite3

            with sqlite3.connect(self.workdir / "data" / "runyard.sqlite") as conn:
                rows = conn.execute(query).fetchall()
        else:
            with psycopg.connect(self.database_url) as conn:
                rows = conn.execute(query).fetchall()
        return "\n".join(value or "" for (value,) in rows)

    def _tables(self, *tables: str) -> bytes:
        assert self.database_url is not None
        out: list[bytes] = []
        with psycopg.connect(self.database_url) as conn:
            for table in tables:
                for (row,) in conn.execute(f'SELECT t::text FROM "{table}" AS t'):
                    out.append(row.encode())
                    # bytea columns appear as hex: their bytes are searched too.
                    for part in row.split("\\\\x")[1:]:
                        digits = part[: len(part) - len(part.lstrip("0123456789abcdef"))]
                        out.append(bytes.fromhex(digits[: len(digits) // 2 * 2]))
        return b"\n".join(out)


@pytest.fixture(params=["sqlite", "postgres"])
def deployment(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Deployment]:
    if request.param == "sqlite":
        yield Deployment("sqlite", tmp_path, None)
        return
    if not postgres_available():
        pytest.fail("PostgreSQL is not reachable at 127.0.0.1:5432; start it (docs/testing.md)")
    url = create_migrated_database("runyard_cenc")
    try:
        yield Deployment("postgres", tmp_path, url)
    finally:
        drop_database(url)


def client_of(url: str, user: str) -> Any:
    return get_client(url=url, api_key=None, headers={"Authorization": f"Bearer {user}"})


async def converse(url: str, user: str) -> str:
    """As `user`: a thread with secret metadata, a run with a secret message, read back in
    plain text through the SDK. The thread's id."""
    client = client_of(url, user)
    try:
        thread = await client.threads.create(
            metadata={"api_key": SECRET_METADATA[user], "note": PLAIN}
        )
        thread_id = thread["thread_id"]
        # Assistants belong to their creator (tests/graphs/auth.py): each user makes one.
        assistant = await client.assistants.create(
            "agent", metadata={"api_key": SECRET_ASSISTANT[user]}
        )
        got = await client.assistants.get(assistant["assistant_id"])
        assert got["metadata"]["api_key"] == SECRET_ASSISTANT[user]
        (version,) = await client.assistants.get_versions(assistant["assistant_id"])
        assert version["metadata"]["api_key"] == SECRET_ASSISTANT[user]
        await client.store.put_item(["enc"], "item", {"api_key": SECRET_STORE[user]})
        item = await client.store.get_item(["enc"], "item")
        assert item is not None and item["value"] == {"api_key": SECRET_STORE[user]}
        answer = await client.runs.wait(
            thread_id,
            assistant["assistant_id"],
            input={"messages": [{"role": "user", "content": SECRETS[user]}]},
            metadata={"secret_token": SECRET_RUN[user]},
        )
        assert answer["messages"][0]["content"] == SECRETS[user]
        state = await client.threads.get_state(thread_id)
        assert state["values"]["messages"][0]["content"] == SECRETS[user]
        (run,) = await client.runs.list(thread_id)
        joined = await client.runs.join(thread_id, run["run_id"])
        assert joined["messages"][0]["content"] == SECRETS[user]
        (found,) = await client.threads.search(metadata={"owner": user})
        assert found["values"]["messages"][0]["content"] == SECRETS[user]
        history = await client.threads.get_history(thread_id)
        assert len(history) >= 2
        assert any(h["metadata"].get("secret_token") == SECRET_RUN[user] for h in history)
        assert not any("__encryption_context__" in h["metadata"] for h in history)
        assert (await client.threads.get(thread_id))["metadata"]["api_key"] == (
            SECRET_METADATA[user]
        )
        assert run["metadata"]["secret_token"] == SECRET_RUN[user]
        assert run["metadata"]["api_key"] == SECRET_METADATA[user]  # inherited from the thread
        (listed,) = (await client.store.search_items(["enc"]))["items"]
        assert listed["value"]["api_key"] == SECRET_STORE[user]
        assert "__encryption_context__" not in run["metadata"]
        assert "__encryption_context__" not in run["kwargs"]
        assert run["kwargs"]["input"]["messages"][0]["content"] == SECRETS[user]
        await client.threads.update(thread_id, metadata={"note": "patched"})
        patched = await client.threads.get(thread_id)
        assert patched["metadata"]["api_key"] == SECRET_METADATA[user]
        assert patched["metadata"]["note"] == "patched"
        await run_a_cron(client, assistant["assistant_id"], user)
        return str(thread_id)
    finally:
        await client.http.client.aclose()


async def run_a_cron(client: Any, assistant_id: str, user: str) -> None:
    """A cron on a thread of its own fires once; its run is written under the creator's
    context (no request is in hand when it fires)."""
    thread = await client.threads.create()
    cron = await client.crons.create_for_thread(
        thread["thread_id"],
        assistant_id,
        schedule="* * * * * *",
        input={"messages": [{"role": "user", "content": SECRETS[user]}]},
        metadata={"api_key": SECRET_CRON[user]},
    )
    try:
        (found,) = await client.crons.search(thread_id=thread["thread_id"])
        assert found["metadata"]["api_key"] == SECRET_CRON[user]
        assert "__encryption_context__" not in found["payload"]
        assert found["payload"]["input"]["messages"][0]["content"] == SECRETS[user]
        for _ in range(200):
            runs = await client.runs.list(thread["thread_id"])
            if any(run["status"] == "success" for run in runs):
                break
            await asyncio.sleep(0.1)
        else:
            raise AssertionError(f"the cron's run did not succeed: {runs}")
    finally:
        await client.crons.delete(cron["cron_id"])
    done = next(run for run in runs if run["status"] == "success")
    assert done["metadata"]["api_key"] == SECRET_CRON[user]
    state = await client.threads.get_state(thread["thread_id"])
    assert state["values"]["messages"][0]["content"] == SECRETS[user]


def test_an_official_encryption_module_works_unchanged(deployment: Deployment) -> None:
    with deployment.server() as proc:
        ids = {user: asyncio.run(converse(proc.url, user)) for user in SECRETS}
        # A filter on an encrypted key could never match its ciphertext: a 422 saying so.
        for path, body in [
            ("/threads/search", {"metadata": {"api_key": SECRET_METADATA["user-a"]}}),
            ("/assistants/search", {"metadata": {"api_key": "x"}}),
            ("/store/items/search", {"namespace_prefix": ["enc"], "filter": {"api_key": "x"}}),
        ]:
            answer = httpx.post(
                proc.url + path, json=body, headers={"Authorization": "Bearer user-a"}, timeout=10
            )
            assert answer.status_code == 422, (path, answer.text)
            assert "encrypted" in answer.json()["detail"], answer.text
    checkpoints = deployment.checkpoint_bytes()
    assert b"+custom" in checkpoints, "checkpoint blobs carry the custom cipher's type"
    # Their metadata (which carries the run's, the thread's and the assistant's) too.
    found = [s for s in [*SECRETS.values(), *JSON_SECRETS] if s.encode() in checkpoints]
    assert not found, f"checkpoints hold plain text: {found}"
    # Each tenant's blobs were written under its own key id, stored beside them.
    for user in SECRETS:
        assert f'"key_id":"key-{user}"'.encode() in checkpoints
    assert b"RYC1\x00\x00\x00\x02{}" not in checkpoints, "a blob written without a context"
    rows = deployment.json_bytes()
    assert b"__encryption_context__" in rows and b"enc:" in rows
    # The messages are in the runs' input (and the crons' payload) too.
    found = [s for s in [*SECRETS.values(), *JSON_SECRETS] if s.encode() in rows]
    assert not found, f"JSON the handlers cover stored in plain text: {found}"
    # The thread's copy of its values and the run's answer to /wait are encrypted too.
    for table, column in [("threads", "values"), ("runs", "output")]:
        text = deployment.column_text(table, column)
        assert "enc:" in text, (table, column)
        assert not [s for s in SECRETS.values() if s in text], (table, column, text[:300])
    # A server started again reads what the first one wrote.
    with deployment.server() as proc:

        async def read_back() -> None:
            client = client_of(proc.url, "user-a")
            try:
                state = await client.threads.get_state(ids["user-a"])
                assert state["values"]["messages"][0]["content"] == SECRETS["user-a"]
            finally:
                await client.http.client.aclose()

        asyncio.run(read_back())


# One marker per field LangGraph's server encrypts that a client can fill.
MARKS = {
    name: f"mk-{name}-5b0e"
    for name in (
        "assistant-config",
        "assistant-context",
        "run-input",
        "run-config",
        "run-configurable",
        "run-context",
        "run-command",
        "run-error",
        "thread-interrupts",
        "cron-input",
        "cron-config",
        "cron-context",
    )
}


async def fill_every_field(url: str) -> None:
    """As user-a: an assistant with config and context, runs with input, config, context
    and a command (answering an interrupt), a failing run, a cron with input, config and
    context; every SDK read answers the plain values."""
    client = client_of(url, "user-a")
    try:
        assistant = await client.assistants.create(
            "agent",
            config={"tags": [MARKS["assistant-config"]]},
            context={"hint": MARKS["assistant-context"]},
        )
        assistant_id = assistant["assistant_id"]
        for got in [
            await client.assistants.get(assistant_id),
            *await client.assistants.get_versions(assistant_id),
            *await client.assistants.search(graph_id="agent", limit=100),
        ]:
            if got["assistant_id"] == assistant_id:
                assert got["config"]["tags"] == [MARKS["assistant-config"]], got
                assert got["context"] == {"hint": MARKS["assistant-context"]}, got
        thread_id = (await client.threads.create())["thread_id"]
        # "please ..." asks for approval with interrupt(): the thread's interrupts hold it.
        asked = await client.runs.wait(
            thread_id,
            assistant_id,
            input={"messages": [{"role": "user", "content": f"please {MARKS['run-input']}"}]},
            config={
                "tags": [MARKS["run-config"]],
                "configurable": {"api_key": MARKS["run-configurable"]},
            },
            context={"tenant_hint": MARKS["run-context"]},
        )
        assert MARKS["run-input"] in str(asked["__interrupt__"]), asked
        thread = await client.threads.get(thread_id)
        assert MARKS["run-input"] in str(thread["interrupts"]), thread
        (with_context,) = await client.threads.search(
            ids=[thread_id], select=["thread_id", "context"]
        )
        assert with_context["context"]["tenant_hint"] == MARKS["run-context"]
        decision = {"type": "reject", "message": MARKS["run-command"]}
        await client.runs.wait(
            thread_id, assistant_id, command={"resume": {"decisions": [decision]}}
        )
        first, second = sorted(await client.runs.list(thread_id), key=lambda run: run["created_at"])
        kwargs = first["kwargs"]
        assert kwargs["input"]["messages"][0]["content"] == f"please {MARKS['run-input']}"
        assert MARKS["run-config"] in kwargs["config"]["tags"]
        assert kwargs["config"]["configurable"]["api_key"] == MARKS["run-configurable"]
        assert kwargs["context"]["tenant_hint"] == MARKS["run-context"]
        assert kwargs["context"]["hint"] == MARKS["assistant-context"]
        assert second["kwargs"]["command"]["resume"]["decisions"] == [decision]
        # The encryptor encrypts the values of an object: any other input is a 422 naming it.
        listed = await client.http.client.post(
            f"/threads/{thread_id}/runs", json={"assistant_id": assistant_id, "input": ["x"]}
        )
        assert listed.status_code == 422 and "input" in listed.json()["detail"], listed.text
        # A thread left waiting for an answer keeps its interrupts.
        waiting = (await client.threads.create())["thread_id"]
        ask = f"please {MARKS['thread-interrupts']}"
        await client.runs.wait(
            waiting, assistant_id, input={"messages": [{"role": "user", "content": ask}]}
        )
        interrupts = (await client.threads.get(waiting))["interrupts"]
        assert MARKS["thread-interrupts"] in str(interrupts), interrupts
        # A failing run: its error, and its thread's, name the input.
        failing = await client.assistants.create("fail")
        failed_thread = (await client.threads.create())["thread_id"]
        await client.runs.create(
            failed_thread, failing["assistant_id"], input={"value": MARKS["run-error"]}
        )
        (failed,) = await client.runs.list(failed_thread)
        joined = await client.runs.join(failed_thread, failed["run_id"])
        assert MARKS["run-error"] in str(joined), joined
        (failed,) = await client.runs.list(failed_thread)
        assert failed["status"] == "error", failed
        assert MARKS["run-error"] in (await client.threads.get(failed_thread))["error"]["message"]
        cron = await client.crons.create(
            assistant_id,
            schedule="0 0 1 1 *",
            input={"messages": [{"role": "user", "content": MARKS["cron-input"]}]},
            config={"tags": [MARKS["cron-config"]]},
            context={"tenant_hint": MARKS["cron-context"]},
        )
        (found,) = [c for c in await client.crons.search() if c["cron_id"] == cron["cron_id"]]
        assert found["payload"]["input"]["messages"][0]["content"] == MARKS["cron-input"]
        assert found["payload"]["config"]["tags"] == [MARKS["cron-config"]]
        assert found["payload"]["context"] == {"tenant_hint": MARKS["cron-context"]}
        await client.crons.update(cron["cron_id"], context={"tenant_hint": MARKS["cron-context"]})
        (found,) = [c for c in await client.crons.search() if c["cron_id"] == cron["cron_id"]]
        assert found["payload"]["input"]["messages"][0]["content"] == MARKS["cron-input"]
    finally:
        await client.http.client.aclose()


def test_every_json_field_langgraph_encrypts_is_stored_encrypted(deployment: Deployment) -> None:
    with deployment.server() as proc:
        asyncio.run(fill_every_field(proc.url))
    rows = deployment.json_bytes()
    found = [name for name, mark in MARKS.items() if mark.encode() in rows]
    assert not found, f"fields stored in plain text: {found}"
    for table, column in [
        ("assistants", "config"),
        ("assistants", "context"),
        ("assistant_versions", "config"),
        ("runs", "kwargs"),
        ("runs", "error"),
        ("threads", "context"),
        ("threads", "interrupts"),
        ("threads", "error"),
        ("crons", "payload"),
    ]:
        assert "enc:" in deployment.column_text(table, column), (table, column)


def test_a_json_encryptor_that_adds_a_key_is_refused_with_its_name(
    deployment: Deployment,
) -> None:
    with deployment.server("langgraph_adds_a_key.json") as proc:
        answer = httpx.post(
            proc.url + "/threads",
            json={"metadata": {"note": PLAIN}},
            headers={"Authorization": "Bearer user-a"},
            timeout=10,
        )
    assert answer.status_code == 500, answer.text
    detail = answer.json()["detail"]
    assert "envelope" in detail and "'__signature__'" in detail, detail
    assert PLAIN.encode() not in deployment.json_bytes()


def test_custom_encryption_and_the_built_in_aes_are_not_both_taken(tmp_path: Path) -> None:
    env = {"LANGGRAPH_AES_KEY": "k1-0123456789abcdef0123456789abc"}
    server = ServerProcess("dev", tmp_path, env=env, config=PROJECT / "langgraph.json")
    with pytest.raises(RuntimeError) as caught:
        server.start()
    assert "encryption.path" in str(caught.value) and "LANGGRAPH_AES_KEY" in str(caught.value)
