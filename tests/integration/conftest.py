"""Fixtures shared by the integration tests that run `runyard` commands."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.test_cli import Cli


@pytest.fixture
def runner(tmp_path: Path) -> Iterator[Cli]:
    """A CLI runner whose processes are always stopped after the test."""
    cli = Cli(tmp_path)
    try:
        yield cli
    finally:
        cli.stop_all()
