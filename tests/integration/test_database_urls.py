"""DATABASE_URL as libpq reads it: `postgres://` and `postgresql://`, and the parameters
LangGraph's documentation shows, meaning the same to asyncpg (the engine, the statement
pool, the setup lock) and to psycopg (LangGraph's saver and store), on the real server.

The shared server has SSL off and listens on 127.0.0.1 and /var/run/postgresql; a start
that cannot connect is one line naming where it tried, never the password.
"""

from __future__ import annotations

import socket
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import psycopg
import pytest

from runyard.checkpoints.psycopg_pools import open_psycopg_pool
from runyard.db.driver import StatementPool
from runyard.db.engine import create_engine
from runyard.db.setup_lock import setup_alone
from runyard.settings import Settings
from tests.integration.test_cli import Cli, wait_for_exit
from tests.support.databases import ADMIN_URL, fresh_database
from tests.support.server import TEST_CONFIG, free_port

pytestmark = pytest.mark.timeout(90)

SOCKET_DIR = Path("/var/run/postgresql")
PASSWORD = "s3cret-pw"


@pytest.fixture
def database() -> Iterator[str]:
    """The name of a fresh, empty database on the shared server."""
    with fresh_database("runyard_urls") as url:
        yield url.rsplit("/", 1)[1]


@pytest.mark.parametrize(("scheme", "sslmode"), [("postgres", "disable"), ("postgresql", "prefer")])
def test_migrate_takes_langgraphs_url_with_its_sslmode(
    runner: Cli, database: str, scheme: str, sslmode: str
) -> None:
    url = f"{scheme}://postgres@127.0.0.1:5432/{database}?sslmode={sslmode}"
    code, output = runner.run("migrate", env={"DATABASE_URI": url})
    assert code == 0, output
    assert "database is at the newest migration" in output
    assert "Traceback" not in output


def parameters_in_effect(rows: dict[str, object], name: str) -> None:
    assert rows["application_name"] == name
    assert rows["statement_timeout"] == "4321ms"  # from `options`
    assert rows["address"] is None  # the socket directory, not TCP


SHOW = (
    "SELECT current_setting('application_name') AS application_name, "
    "current_setting('statement_timeout') AS statement_timeout, "
    "inet_server_addr()::text AS address"
)


@pytest.mark.skipif(not SOCKET_DIR.is_dir(), reason="no PostgreSQL socket directory here")
async def test_every_driver_connects_as_the_parameters_say(database: str) -> None:
    from runyard.db.conninfo import libpq_url

    name = f"runyard-{uuid.uuid4().hex[:8]}"
    options = quote("-c statement_timeout=4321", safe="")
    url = (
        f"postgres://postgres@/{database}?host={SOCKET_DIR}&application_name={name}"
        f"&options={options}&connect_timeout=5&sslmode=disable&target_session_attrs=read-write"
    )
    # The engine, as Settings normalizes the URL for it.
    engine = create_engine(Settings(DATABASE_URL=url).resolved_database_url())
    try:
        async with engine.connect() as conn:
            parameters_in_effect(dict((await conn.exec_driver_sql(SHOW)).mappings().one()), name)
            # The statement pool, on connections of its own.
            statements = StatementPool(engine, 1)
            await statements.open()
            try:
                parameters_in_effect((await statements.fetch_sql(SHOW, []))[0], name)
            finally:
                await statements.close()
            # psycopg (libpq), as the PostgreSQL saver and store open their pools.
            pool = await open_psycopg_pool(libpq_url(url), 1)
            try:
                async with pool.connection() as psycopg_conn:
                    cursor = await psycopg_conn.execute(SHOW)
                    parameters_in_effect(await cursor.fetchone(), name)
            finally:
                await pool.close()
            # The setup lock's own connection.
            seen: list[int] = []

            async def count_sessions() -> None:
                with psycopg.connect(ADMIN_URL) as admin:
                    found = admin.execute(
                        "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s "
                        "AND client_addr IS NULL",
                        [name],
                    ).fetchone()
                    seen.append(found[0] if found else 0)

            await setup_alone(libpq_url(url), 1_234_567, count_sessions)
            # The engine's connection and the setup lock's, both named and on the socket.
            assert seen[0] >= 2
    finally:
        await engine.dispose()


def test_a_parameter_runyard_cannot_honour_is_refused_naming_it(runner: Cli) -> None:
    url = "postgresql://postgres@127.0.0.1:5432/postgres?keepalives_idle=30"
    code, output = runner.run("migrate", env={"DATABASE_URL": url})
    assert code == 2, output
    assert "keepalives_idle" in output
    assert "DATABASE_URL" in output
    assert "Traceback" not in output


def one_error_line(output: str, marker: str) -> str:
    lines = [line for line in output.splitlines() if marker in line]
    assert len(lines) == 1, output
    assert "Traceback" not in output
    assert PASSWORD not in output
    return lines[0]


def test_migrate_to_a_closed_port_says_where_in_one_line(runner: Cli) -> None:
    port = free_port()
    url = f"postgresql://runyard:{PASSWORD}@127.0.0.1:{port}/runyard"
    code, output = runner.run("migrate", env={"DATABASE_URL": url})
    assert code == 2, output
    line = one_error_line(output, "runyard: error:")
    assert f"127.0.0.1:{port}" in line
    assert "refused" in line


def test_serve_with_a_closed_port_fails_in_one_line_naming_it(runner: Cli) -> None:
    port = free_port()
    url = f"postgres://runyard:{PASSWORD}@127.0.0.1:{port}/runyard"
    args = ["serve", "--port", str(free_port()), "--config", str(TEST_CONFIG)]
    code, output = wait_for_exit(*runner.start(*args, env={"DATABASE_URI": url}))
    assert code == 3, output
    line = one_error_line(output, "startup_failed")
    assert f"127.0.0.1:{port}" in line


def test_sslmode_require_on_a_server_without_ssl_says_so(runner: Cli, database: str) -> None:
    url = f"postgresql://postgres:{PASSWORD}@127.0.0.1:5432/{database}?sslmode=require"
    code, output = runner.run("migrate", env={"DATABASE_URL": url})
    assert code == 2, output
    line = one_error_line(output, "runyard: error:")
    assert "127.0.0.1:5432" in line
    assert "SSL" in line
    assert "sslmode" in line


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port on 127.0.0.1 that accepts connections and never answers."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(listener.accept()[0])
            except TimeoutError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        stop.set()
        thread.join(timeout=5)
        for conn in held:
            conn.close()
        listener.close()


def test_connect_timeout_bounds_the_wait_for_a_silent_server(runner: Cli, silent_port: int) -> None:
    url = f"postgresql://postgres@127.0.0.1:{silent_port}/postgres?connect_timeout=2"
    code, output = runner.run("migrate", env={"DATABASE_URL": url}, timeout=45)
    assert code == 2, output
    line = one_error_line(output, "runyard: error:")
    assert f"127.0.0.1:{silent_port}" in line
    assert "connect_timeout" in line
