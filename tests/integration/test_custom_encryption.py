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

from tests.support.databases import create_database, drop_database, postgres_available
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
        pytest.fail("PostgreSQL is not reachable at 127.0.0.1:5432; start it (see README)")
    url = create_database("runyard_cenc")
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
    found = [secret for secret in JSON_SECRETS if secret.encode() in rows]
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
