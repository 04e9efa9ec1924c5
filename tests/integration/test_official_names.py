"""`runyard serve` with LangGraph's server's environment names, and without a database."""

from __future__ import annotations

import uuid
from pathlib import Path

import httpx
import pytest

from runyard.app.factory import create_app
from runyard.settings import Settings
from tests.integration.test_cli import Cli, wait_for_exit
from tests.integration.test_cli_startup import wait_for_serving
from tests.support.databases import fresh_database
from tests.support.redis_keys import delete_keys
from tests.support.server import TEST_CONFIG, free_port

REDIS = "redis://127.0.0.1:6379/0"

pytestmark = pytest.mark.timeout(90)


def test_serve_runs_on_postgres_and_redis_named_as_langgraphs_server_names_them(
    runner: Cli,
) -> None:
    """langgraph-api 0.16.7 reads DATABASE_URI, REDIS_URI and REDIS_KEY_PREFIX
    (langgraph_api/config); `runyard serve` given only those uses PostgreSQL and Redis."""
    prefix = f"runyard-test-{uuid.uuid4().hex[:8]}:"
    port = free_port()
    with fresh_database("runyard_names") as url:
        env = {"DATABASE_URI": url, "REDIS_URI": REDIS, "REDIS_KEY_PREFIX": prefix}
        try:
            args = ["serve", "--port", str(port), "--config", str(TEST_CONFIG)]
            output = wait_for_serving(runner, *args, env=env)
            info = httpx.get(f"http://127.0.0.1:{port}/info", timeout=5).json()
            assert info["runyard"]["database"] == "postgresql", output
            assert info["runyard"]["queue"] == "redis", output
        finally:
            runner.stop_all()
            delete_keys(REDIS, prefix)


def test_serve_without_a_database_refuses_in_one_line_naming_the_setting(runner: Cli) -> None:
    args = ["serve", "--port", str(free_port()), "--config", str(TEST_CONFIG)]
    code, output = wait_for_exit(*runner.start(*args))
    assert code == 2, output
    lines = output.strip().splitlines()
    assert len(lines) == 1, output
    assert "DATABASE_URL" in lines[0]
    assert "--sqlite" in lines[0]
    assert "RUNYARD_SQLITE=true" in lines[0]


@pytest.mark.parametrize(
    ("flags", "env"),
    [(["--sqlite"], None), ([], {"RUNYARD_SQLITE": "true"})],
    ids=["flag", "setting"],
)
def test_serve_on_sqlite_when_asked_for(
    runner: Cli, flags: list[str], env: dict[str, str] | None
) -> None:
    port = free_port()
    args = ["serve", "--port", str(port), "--config", str(TEST_CONFIG), *flags]
    wait_for_serving(runner, *args, env=env)
    info = httpx.get(f"http://127.0.0.1:{port}/info", timeout=5).json()
    assert info["runyard"]["database"] == "sqlite"


async def test_mount_prefix_from_the_environment_serves_under_the_prefix(tmp_path: Path) -> None:
    """langgraph-api 0.16.7: MOUNT_PREFIX, when set, wins over http.mount_prefix."""
    settings = Settings(
        DATABASE_URL="",
        REDIS_URL="",
        MOUNT_PREFIX="/my-api",
        RUNYARD_DATA_DIR=tmp_path / "data",
        RUNYARD_CONFIG=TEST_CONFIG,
    )
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://runyard") as http:
            assert (await http.get("/my-api/info")).status_code == 200
            assert (await http.get("/info")).status_code == 404
            assert (await http.get("/ok")).status_code == 200
