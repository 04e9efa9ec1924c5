"""Fixtures: a real Runyard server per storage backend and a langgraph-sdk client for it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from langgraph_sdk import get_client
from langgraph_sdk.client import LangGraphClient

from tests.support.backends import backend_server
from tests.support.server import ServerProcess

BACKENDS = ["sqlite", "postgres"]
# Fixtures shared by several test folders (`receiver`: a webhook receiver; `auth_server` and
# `users`: a server with the test auth handlers and clients of two users).
pytest_plugins = ["tests.support.webhooks", "tests.support.auth"]


@pytest.fixture(scope="session", params=BACKENDS)
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    """A running server: `runyard dev` on SQLite, or `runyard serve` on a fresh PostgreSQL db."""
    workdir = tmp_path_factory.mktemp(f"server-{request.param}")
    with backend_server(request.param, workdir) as proc:
        yield proc


@pytest.fixture
async def client(server: ServerProcess) -> AsyncIterator[LangGraphClient]:
    """A langgraph-sdk client talking to the server over HTTP."""
    lg = get_client(url=server.url, api_key=None)
    try:
        yield lg
    finally:
        await lg.http.client.aclose()


@pytest.fixture
def base_url(server: ServerProcess) -> str:
    """The server's base URL, for raw HTTP calls."""
    return server.url


@pytest.fixture(scope="session")
def repo_root() -> Path:
    """The repository root."""
    return Path(__file__).resolve().parents[1]


# In parallel (`pytest -n 2 --dist loadgroup --no-loadscope-reorder`, which
# `RUNYARD_TEST_WORKERS=2 scripts/test` runs) a worker takes one group of tests at a time, the
# groups this file defines (pytest-xdist's own `xdist_group` marks are lost on pytest 9.2, which
# no longer lets it rename the tests). A group is a file, so its module fixtures are built once;
# a file's tests on the SQLite backend and on the PostgreSQL one are two groups, so that each
# worker starts the shared `server` of each backend once, instead of once per file. Tests that
# share something only one process may use at a time form one group:
SHARED_GROUPS = {
    # One private dockerd on the cached data root (tests/support/docker.py holds its lock).
    "tests/integration/test_project_image.py": "docker",
    "tests/integration/test_runyard_up.py": "docker",
    # Each browser test rebuilds the pages into examples/web/dist and serves them from there.
    "tests/browser/": "browser",
}
# The longest groups start first, so that neither worker is left alone with one at the end.
FIRST = ("docker", "tests/integration/test_wheel.py", "tests/chaos/test_stream_load.py")


def group_of(nodeid: str) -> str:
    """The group of tests one worker runs together (see SHARED_GROUPS), from a test's id:
    the scheduler has nothing else."""
    path, _, name = nodeid.partition("::")
    for prefix, group in SHARED_GROUPS.items():
        if path.startswith(prefix):
            return group
    params = name[name.find("[") + 1 : -1].split("-") if name.endswith("]") else []
    for backend in ("sqlite", "postgres"):
        if backend in params:
            return f"{path}[{backend}]"
    return path


def parallel(config: pytest.Config) -> bool:
    """True in a run on several workers with these groups, in the workers too (where
    pytest-xdist has set `dist` back to "no" and says `loadgroup` instead)."""
    return getattr(config.option, "dist", "no") == "loadgroup" or bool(
        getattr(config.option, "loadgroup", False)
    )


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Under `--dist loadgroup`: pytest-xdist's scope scheduler, scoped by `group_of`."""
    if not parallel(config):
        return None
    from xdist.scheduler import LoadScopeScheduling

    class GroupScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return group_of(nodeid)

    return GroupScheduling(config, log)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """In parallel: the longest groups first (the scheduler hands groups out in the order the
    workers collected them), once pytest has ordered the rest."""
    if not parallel(config):
        return

    def rank(item: pytest.Item) -> int:
        group = group_of(item.nodeid)
        return FIRST.index(group) if group in FIRST else len(FIRST)

    items.sort(key=rank)  # stable: the order pytest chose within a rank is kept
