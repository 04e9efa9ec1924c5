"""Both checkpoint savers, encrypting (LANGGRAPH_AES_KEY, LANGGRAPH_AES_JSON_KEYS), still pass
LangGraph's checkpointer conformance suite, and read what they wrote before encryption."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.conformance import checkpointer_test, validate

from runyard.db.engine import create_engine
from runyard.encryption.at_rest import from_settings
from tests.support.databases import fresh_database, open_statement_pool

pytestmark = pytest.mark.timeout(180)

KEY = "0123456789abcdef"


@pytest.fixture(params=["sqlite", "postgres"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp_path / 'runyard.sqlite'}"
        return
    with fresh_database("runyard_enc_saver") as url:
        yield "postgresql+asyncpg://" + url.split("://", 1)[1]


async def test_encrypting_savers_pass_the_conformance_suite(
    database_url: str, tmp_path: Path
) -> None:
    from runyard.checkpoints.checkpointer import open_checkpointer
    from runyard.db.schema import migrate

    at_rest = from_settings(KEY, [], ["api_key", "messages"])
    assert at_rest is not None
    engine = create_engine(database_url, 4, at_rest.json)
    try:
        await migrate(engine)
        async with open_statement_pool(engine, 4) as pool:

            @checkpointer_test(name="encrypting saver")
            async def saver() -> AsyncIterator[BaseCheckpointSaver]:
                async with open_checkpointer(
                    database_url, tmp_path, None, 4, pool, at_rest
                ) as opened:
                    yield opened

            report = await validate(saver)
    finally:
        await engine.dispose()
    failures = {name: r.failures for name, r in report.results.items() if r.failures}
    assert report.passed_all(), failures
