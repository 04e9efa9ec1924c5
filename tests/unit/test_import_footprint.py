"""Starting the server loads no module it may never need (each costs resident memory)."""

from __future__ import annotations

import subprocess
import sys

from tests.support.server import ROOT

# psycopg (and its pool) about 10 MiB, sqlite3 about 1 MiB, croniter about 0.9 MiB: loaded
# only when the PostgreSQL store or the checkpointer's history is used, in dev mode, and when
# a cron is handled. The A2A and MCP machinery (protobuf, grpc, the SDKs, jsonschema: about
# 25 MiB) only when /a2a or /mcp is first called. Encryption at rest only when a key is set:
# every module of it imports runyard.encryption.keys, and the handlers of `encryption.path`
# are runyard.encryption.custom (encrypted_json.py, which passes stored JSON through them
# when they are set, is loaded by the services and imports neither).
DEFERRED = (
    "psycopg",
    "psycopg_pool",
    "langgraph.checkpoint.postgres",
    "langgraph.store.postgres",
    "sqlite3",
    "croniter",
    "a2a",
    "grpc",
    "mcp_types",
    "jsonschema",
    "runyard.encryption.keys",
    "runyard.encryption.custom",
)


def test_importing_the_server_loads_no_deferred_module() -> None:
    script = (
        "import sys\n"
        "import runyard.app.factory, runyard.cli\n"
        "from runyard.checkpoints import checkpointer, pg_saver\n"
        "from runyard.longterm_store import store\n"
        "from runyard.db import setup_lock\n"
        f"print(','.join(m for m in {DEFERRED!r} if m in sys.modules))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert result.stdout.strip() == "", f"loaded at import: {result.stdout.strip()}"
