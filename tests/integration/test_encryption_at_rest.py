"""Encryption at rest (LANGGRAPH_AES_KEY, LANGGRAPH_AES_JSON_KEYS), on real servers in both
modes, with the database files and tables read directly.

Compared against LangGraph's server, langgraph-api 0.16.7 (`langgraph_api/encryption/`), and
langgraph-checkpoint 4.3's `EncryptedSerializer`: the same settings and meanings (the key
encrypts checkpoint blobs; the JSON keys are encrypted wherever they appear in thread,
assistant, run, cron and store JSON, system fields never; encrypted keys cannot be
searched). Differences, on purpose: AES-GCM from `cryptography` where LangGraph uses
AES-EAX from pycryptodome (cipher `aes-gcm`, not `aes`, so neither reads the other's
ciphertexts); each ciphertext names its key, several keys decrypt (RUNYARD_AES_DECRYPT_KEYS)
and `runyard reencrypt` rotates; a search naming an encrypted key is a 422 where LangGraph
matches nothing.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import signal
import subprocess
import sys
import time
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

KEY_1 = "k1-0123456789abcdef0123456789abc"  # 32 bytes
KEY_2 = "k2-fedcba9876543210"[:16]  # 16 bytes
OTHER_KEY = "xx-0123456789abcdefghijk"  # 24 bytes, never used to write
JSON_KEYS = "api_key,secret_token,messages"
# Values that must never be found in the database's bytes; PLAIN must (the scan works).
SECRET_MESSAGE = "tell-no-one-7d1c"
SECRET_METADATA = "sk-metadata-91aa"
SECRET_RUN = "sk-run-metadata-55e0"
SECRET_STORE = "sk-store-value-c3f2"
SECRET_ASSISTANT = "sk-assistant-e41b"
SECRET_CRON = "sk-cron-0f9d"
SECRETS = [
    SECRET_MESSAGE,
    SECRET_METADATA,
    SECRET_RUN,
    SECRET_STORE,
    SECRET_ASSISTANT,
    SECRET_CRON,
]
PLAIN = "visible-note-2b7e"


def key_id(key: str) -> str:
    """The key id Runyard writes beside a ciphertext (runyard/encryption/keys.py)."""
    return hashlib.sha256(b"runyard aes key id\x00" + key.encode()).digest()[:8].hex()


class Deployment:
    """One deployment's data (a SQLite folder or a PostgreSQL database), served by servers
    started one after another with different keys."""

    def __init__(self, backend: str, workdir: Path, database_url: str | None) -> None:
        self.backend = backend
        self.workdir = workdir
        self.database_url = database_url

    def env(self, **settings: str) -> dict[str, str]:
        """The environment of a server or command of this deployment."""
        env = {"RUNYARD_DATA_DIR": str(self.workdir / "data"), **settings}
        if self.database_url:
            env.update({"DATABASE_URL": self.database_url, "REDIS_URL": ""})
        return env

    @contextmanager
    def server(self, **settings: str) -> Iterator[ServerProcess]:
        """A server of the deployment with these settings, stopped on exit."""
        mode = "dev" if self.backend == "sqlite" else "serve"
        proc = ServerProcess(mode, self.workdir, env=self.env(**settings)).start()
        try:
            yield proc
        finally:
            proc.stop()

    def reencrypt(self, *args: str, **settings: str) -> subprocess.Popen[str]:
        """`runyard reencrypt` started (not waited for), its output piped."""
        return subprocess.Popen(
            [sys.executable, "-m", "runyard.cli", "reencrypt", *args],
            cwd=str(ROOT),
            env={**os.environ, **self.env(**settings)},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )

    def stored_bytes(self) -> bytes:
        """Everything stored: the SQLite files (WAL included) or every PostgreSQL table."""
        if self.database_url is None:
            data = self.workdir / "data"
            return b"".join(path.read_bytes() for path in sorted(data.rglob("*.sqlite*")))
        out: list[bytes] = []
        with psycopg.connect(self.database_url) as conn:
            tables = conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = 'public'"
            ).fetchall()
            for (table,) in tables:
                for (row,) in conn.execute(f'SELECT t::text FROM "{table}" AS t'):
                    out.append(row.encode())
                    # bytea columns appear as hex: their bytes are searched too.
                    for part in row.split("\\\\x")[1:]:
                        hex_digits = part[: len(part) - len(part.lstrip("0123456789abcdef"))]
                        out.append(bytes.fromhex(hex_digits[: len(hex_digits) // 2 * 2]))
        return b"\n".join(out)

    def run_rows(self, thread_id: str) -> dict[str, tuple[str, str]]:
        """Status and error text of the thread's runs, read from the database."""
        query = "SELECT run_id, status, CAST(error AS text) FROM runs WHERE thread_id = "
        if self.database_url is None:
            import sqlite3

            with sqlite3.connect(self.workdir / "data" / "runyard.sqlite") as conn:
                rows = conn.execute(query + "?", (thread_id,)).fetchall()
        else:
            with psycopg.connect(self.database_url) as conn:
                rows = conn.execute(query + "%s", (thread_id,)).fetchall()
        return {run_id: (status, error or "") for run_id, status, error in rows}

    def key_ids_stored(self) -> set[str]:
        """The key ids of the JSON ciphertexts stored (`encrypted.aes-gcm:<id>:`)."""
        data = self.stored_bytes()
        marker = b"encrypted.aes-gcm:"
        ids = set()
        start = data.find(marker)
        while start >= 0:
            ids.add(data[start + len(marker) : start + len(marker) + 16].decode())
            start = data.find(marker, start + 1)
        return ids


@pytest.fixture(params=["sqlite", "postgres"])
def deployment(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Deployment]:
    if request.param == "sqlite":
        yield Deployment("sqlite", tmp_path, None)
        return
    if not postgres_available():
        pytest.fail("PostgreSQL is not reachable at 127.0.0.1:5432; start it (docs/testing.md)")
    url = create_migrated_database("runyard_enc")
    try:
        yield Deployment("postgres", tmp_path, url)
    finally:
        drop_database(url)


async def write_everything(url: str) -> dict[str, Any]:
    """Through the SDK: a thread, a run, an assistant, a cron and a store item, each with
    secrets under the configured keys. The ids, to read them back."""
    client = get_client(url=url, api_key=None)
    try:
        thread = await client.threads.create(metadata={"api_key": SECRET_METADATA, "note": PLAIN})
        assistant = await client.assistants.create(
            "agent", metadata={"api_key": SECRET_ASSISTANT}, config={"configurable": {}}
        )
        await client.runs.wait(
            thread["thread_id"],
            "agent",
            input={"messages": [{"role": "user", "content": SECRET_MESSAGE}]},
            metadata={"secret_token": SECRET_RUN},
        )
        cron = await client.crons.create_for_thread(
            thread["thread_id"],
            "agent",
            schedule="0 0 1 1 *",
            input={"messages": [{"role": "user", "content": "hi"}]},
            metadata={"api_key": SECRET_CRON},
        )
        await client.store.put_item(["enc"], "item", {"api_key": SECRET_STORE, "note": PLAIN})
        return {
            "thread_id": thread["thread_id"],
            "assistant_id": assistant["assistant_id"],
            "cron_id": cron["cron_id"],
        }
    finally:
        await client.http.client.aclose()


async def read_everything(url: str, ids: dict[str, Any]) -> None:
    """Every secret comes back in plain text through the SDK."""
    client = get_client(url=url, api_key=None)
    try:
        thread = await client.threads.get(ids["thread_id"])
        assert thread["metadata"]["api_key"] == SECRET_METADATA
        state = await client.threads.get_state(ids["thread_id"])
        assert state["values"]["messages"][0]["content"] == SECRET_MESSAGE
        (run,) = await client.runs.list(ids["thread_id"])
        assert run["metadata"]["secret_token"] == SECRET_RUN
        assistant = await client.assistants.get(ids["assistant_id"])
        assert assistant["metadata"]["api_key"] == SECRET_ASSISTANT
        (cron,) = await client.crons.search(thread_id=ids["thread_id"])
        assert cron["metadata"]["api_key"] == SECRET_CRON
        item = await client.store.get_item(["enc"], "item")
        assert item is not None and item["value"]["api_key"] == SECRET_STORE
        history = await client.threads.get_history(ids["thread_id"])
        assert any(h["metadata"].get("secret_token") == SECRET_RUN for h in history)
        joined = await client.runs.join(ids["thread_id"], run["run_id"])
        assert joined["messages"][0]["content"] == SECRET_MESSAGE
        (found,) = await client.threads.search(metadata={"note": PLAIN})
        assert found["metadata"]["api_key"] == SECRET_METADATA
        assert found["values"]["messages"][0]["content"] == SECRET_MESSAGE
        (listed,) = (await client.store.search_items(["enc"]))["items"]
        assert listed["value"]["api_key"] == SECRET_STORE
        (version,) = await client.assistants.get_versions(ids["assistant_id"])
        assert version["metadata"]["api_key"] == SECRET_ASSISTANT
    finally:
        await client.http.client.aclose()


def assert_nothing_plain(deployment: Deployment) -> None:
    stored = deployment.stored_bytes()
    assert PLAIN.encode() in stored, "the scan must find what is not encrypted"
    found = [secret for secret in SECRETS if secret.encode() in stored]
    assert not found, f"stored in plain text: {found}"


def test_configured_data_is_never_stored_in_plain_text(deployment: Deployment) -> None:
    with deployment.server(LANGGRAPH_AES_KEY=KEY_1, LANGGRAPH_AES_JSON_KEYS=JSON_KEYS) as proc:
        ids = asyncio.run(write_everything(proc.url))
        asyncio.run(read_everything(proc.url, ids))
        # A search or filter on an encrypted key: a 422 saying so (LangGraph matches nothing).
        for path, body in [
            ("/threads/search", {"metadata": {"api_key": SECRET_METADATA}}),
            ("/threads/count", {"values": {"messages": []}}),
            ("/assistants/search", {"metadata": {"api_key": SECRET_ASSISTANT}}),
            ("/runs/crons/search", {"metadata": {"api_key": SECRET_CRON}}),
            ("/store/items/search", {"namespace_prefix": ["enc"], "filter": {"api_key": "x"}}),
        ]:
            answer = httpx.post(proc.url + path, json=body, timeout=10)
            assert answer.status_code == 422, (path, answer.text)
            assert "encrypted" in answer.json()["detail"], answer.text
        # Other keys still filter.
        found = httpx.post(
            proc.url + "/threads/search", json={"metadata": {"note": PLAIN}}, timeout=10
        )
        assert [t["thread_id"] for t in found.json()] == [ids["thread_id"]]
    assert_nothing_plain(deployment)
    assert deployment.key_ids_stored() == {key_id(KEY_1)}


def test_a_wrong_key_is_a_clear_error_and_the_run_fails_once(deployment: Deployment) -> None:
    with deployment.server(LANGGRAPH_AES_KEY=KEY_1, LANGGRAPH_AES_JSON_KEYS=JSON_KEYS) as proc:
        ids = asyncio.run(write_everything(proc.url))
        # A thread whose JSON holds no encrypted key: only its checkpoints are unreadable.
        bare = httpx.post(proc.url + "/threads", json={}, timeout=10).json()["thread_id"]
        run = httpx.post(
            f"{proc.url}/threads/{bare}/runs/wait",
            json={"assistant_id": "pipeline", "input": {"text": "a b"}},
            timeout=30,
        )
        assert run.status_code == 200, run.text
    with deployment.server(LANGGRAPH_AES_KEY=OTHER_KEY) as proc:
        answer = httpx.get(f"{proc.url}/threads/{ids['thread_id']}", timeout=10)
        assert answer.status_code == 500
        detail = answer.json()["detail"]
        assert "'api_key'" in detail and key_id(KEY_1) in detail, detail
        assert "RUNYARD_AES_DECRYPT_KEYS" in detail
        state = httpx.get(f"{proc.url}/threads/{bare}/state", timeout=10)
        assert state.status_code == 500
        assert f"thread {bare}" in state.json()["detail"] and key_id(KEY_1) in state.text
        # A run on that thread fails once, with the reason; it is not tried again.
        run = httpx.post(
            f"{proc.url}/threads/{bare}/runs/wait",
            json={"assistant_id": "pipeline", "input": {"text": "c"}},
            timeout=30,
        )
        runs = httpx.get(f"{proc.url}/threads/{bare}/runs", timeout=10).json()
        failed = [r for r in runs if r["status"] == "error"]
        assert len(failed) == 1, runs
        run_id = failed[0]["run_id"]
        log = proc.log_path.read_text()
        assert log.count(f"run_claimed run_id={run_id}") == 1, log[-3000:]
        assert failed[0]["status"] == "error"
        assert "DecryptionError" in run.text and key_id(KEY_1) in run.text, run.text
        assert "run_outcome_unstorable" not in log


def test_runs_queued_under_a_removed_key_fail_once(deployment: Deployment) -> None:
    # Stopping hands the running run back at once (no drain): both runs wait, under key 1.
    settings = {"LANGGRAPH_AES_JSON_KEYS": JSON_KEYS, "WORKER_DRAIN_TIMEOUT": "0"}
    with deployment.server(LANGGRAPH_AES_KEY=KEY_1, **settings) as proc:
        thread = httpx.post(proc.url + "/threads", json={}, timeout=10).json()["thread_id"]
        runs = [
            httpx.post(
                f"{proc.url}/threads/{thread}/runs",
                json={
                    "assistant_id": graph,
                    "input": body,
                    "metadata": {"api_key": SECRET_RUN},
                    "multitask_strategy": "enqueue",
                },
                timeout=10,
            ).json()["run_id"]
            for graph, body in [("slow", {"seconds": 60}), ("agent", {"messages": []})]
        ]
    with deployment.server(LANGGRAPH_AES_KEY=OTHER_KEY, **settings) as proc:
        # Reading them over HTTP is the clear 500 above; the rows say how they ended.
        answer = httpx.get(f"{proc.url}/threads/{thread}/runs/{runs[0]}", timeout=10)
        assert answer.status_code == 500 and key_id(KEY_1) in answer.text
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            rows = deployment.run_rows(thread)
            if all(status == "error" for status, _ in rows.values()):
                break
            time.sleep(0.2)
        for run_id in runs:
            status, error = rows[run_id]
            assert status == "error" and "DecryptionError" in error, rows
            assert key_id(KEY_1) in error, error
        log = proc.log_path.read_text()
        for run_id in runs:
            assert log.count(f"run_unreadable run_id={run_id}") == 1, log[-3000:]


def test_keys_rotate_and_reencrypt_survives_a_kill(deployment: Deployment) -> None:
    with deployment.server(LANGGRAPH_AES_KEY=KEY_1, LANGGRAPH_AES_JSON_KEYS=JSON_KEYS) as proc:
        ids = asyncio.run(write_everything(proc.url))
    rotated = {
        "LANGGRAPH_AES_KEY": KEY_2,
        "RUNYARD_AES_DECRYPT_KEYS": KEY_1,
        "LANGGRAPH_AES_JSON_KEYS": JSON_KEYS,
    }
    with deployment.server(**rotated) as proc:
        # Key 1's data reads with key 2 added; re-encryption runs beside the server.
        asyncio.run(read_everything(proc.url, ids))
        command = deployment.reencrypt("--batch-size", "1", "--pause", "1", **rotated)
        assert command.stdout is not None
        first = command.stdout.readline()
        assert first.startswith("reencrypt_batch"), first + command.stdout.read()
        command.send_signal(signal.SIGKILL)
        command.wait(timeout=10)
        command.stdout.close()
        assert deployment.key_ids_stored() >= {key_id(KEY_1)}, "killed before the end"
        again = deployment.reencrypt("--batch-size", "50", **rotated)
        output, _ = again.communicate(timeout=120)
        assert again.returncode == 0, output
        assert "re-encrypted under key id " + key_id(KEY_2) in output
        asyncio.run(read_everything(proc.url, ids))
    assert deployment.key_ids_stored() == {key_id(KEY_2)}
    assert_nothing_plain(deployment)
    # Key 1 is gone: everything still reads under key 2 alone.
    with deployment.server(LANGGRAPH_AES_KEY=KEY_2, LANGGRAPH_AES_JSON_KEYS=JSON_KEYS) as proc:
        asyncio.run(read_everything(proc.url, ids))


def test_settings_are_checked_at_start_up(tmp_path: Path) -> None:
    for env, says in [
        ({"LANGGRAPH_AES_KEY": "too-short"}, "LANGGRAPH_AES_KEY must be 16, 24 or 32 bytes"),
        ({"LANGGRAPH_AES_JSON_KEYS": "api_key"}, "needs LANGGRAPH_AES_KEY"),
        (
            {"LANGGRAPH_AES_KEY": KEY_1, "RUNYARD_AES_DECRYPT_KEYS": "short"},
            "RUNYARD_AES_DECRYPT_KEYS (key 1) must be 16, 24 or 32 bytes",
        ),
    ]:
        done = subprocess.run(
            [sys.executable, "-m", "runyard.cli", "reencrypt"],
            cwd=str(ROOT),
            env={**os.environ, "RUNYARD_DATA_DIR": str(tmp_path), **env},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 2 and says in done.stderr, done.stderr
