"""Fixtures shared by the integration tests that run `runyard` commands."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from tests.integration.test_cli import Cli
from tests.support.databases import Counted, migrated_engine


@pytest.fixture
def runner(tmp_path: Path) -> Iterator[Cli]:
    """A CLI runner whose processes are always stopped after the test."""
    cli = Cli(tmp_path)
    try:
        yield cli
    finally:
        cli.stop_all()


@pytest.fixture(params=["sqlite", "postgres"])
async def counted_database(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[Counted]:
    """A fresh, migrated database of each backend, its statements counted."""
    async with migrated_engine(request.param, tmp_path) as engine:
        yield Counted(engine)
