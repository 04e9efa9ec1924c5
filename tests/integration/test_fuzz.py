"""A schemathesis fuzz pass over the OpenAPI spec of real servers: no input gets a 500.

Every operation of /openapi.json gets a few generated requests, valid ones (positive) and
invalid ones (negative), checked with schemathesis' `not_a_server_error`. The servers are
dedicated: fuzzing calls bulk endpoints (cancel every run, delete...) that would disturb the
shared ones. The budget is bounded by MAX_EXAMPLES per operation and mode, not by a clock:
every operation is fuzzed however busy the machine is, and the test's timeout catches a hang.
Inputs are the same on every run unless RUNYARD_FUZZ_RANDOM=1.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.support.databases import create_database, drop_database, postgres_available
from tests.support.server import ServerProcess

schemathesis = pytest.importorskip("schemathesis")
import requests  # noqa: E402
from hypothesis import HealthCheck, Phase, given, settings  # noqa: E402
from hypothesis.errors import Unsatisfiable  # noqa: E402
from schemathesis.checks import not_a_server_error  # noqa: E402
from schemathesis.errors import FailureGroup  # noqa: E402

MAX_EXAMPLES = 10
# Reproducible by default, so CI is stable; RUNYARD_FUZZ_RANDOM=1 explores new inputs.
DERANDOMIZE = os.environ.get("RUNYARD_FUZZ_RANDOM", "") not in ("1", "true", "yes")
REQUEST_TIMEOUT = 10.0
MODES = (schemathesis.GenerationMode.POSITIVE, schemathesis.GenerationMode.NEGATIVE)


@pytest.fixture(params=["dev", "serve"])
def fuzz_server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    """A server of its own per backend: SQLite (dev) or a fresh PostgreSQL database (serve)."""
    mode = request.param
    workdir = tmp_path_factory.mktemp(f"fuzz-{mode}")
    url = None
    env = {"RUNYARD_CRON_INTERVAL_SECONDS": "5"}
    if mode == "serve":
        if not postgres_available():
            pytest.fail("PostgreSQL is not reachable at 127.0.0.1:5432; start it (see README)")
        url = create_database("runyard_fuzz")
        env.update(DATABASE_URL=url, REDIS_URL="")
    proc = ServerProcess(mode, workdir, env=env)
    try:
        proc.start()
        yield proc
    finally:
        proc.stop()
        if url is not None:
            drop_database(url)


@dataclass
class FuzzReport:
    """What the pass saw: server errors, timeouts, and what the budget left out."""

    failures: list[str] = field(default_factory=list)
    timeouts: list[str] = field(default_factory=list)
    requests: int = 0


def fuzz_operation(
    operation: Any, mode: Any, base_url: str, session: requests.Session, report: FuzzReport
) -> None:
    """Send MAX_EXAMPLES generated requests to one operation; record every server error."""
    label = f"{operation.method.upper()} {operation.path} [{mode.value}]"

    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(
        max_examples=MAX_EXAMPLES,
        deadline=None,
        database=None,
        derandomize=DERANDOMIZE,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    def check(case: Any) -> None:
        report.requests += 1
        try:
            response = case.call(base_url=base_url, session=session, timeout=REQUEST_TIMEOUT)
        except requests.Timeout:
            report.timeouts.append(label)
            return
        try:
            case.validate_response(response, checks=[not_a_server_error])
        except FailureGroup:
            sent = {
                "path": case.path_parameters,
                "query": case.query,
                "body": case.body,
            }
            report.failures.append(
                f"{label} -> {response.status_code} {response.text[:200]!r}; sent {sent!r:.600}"
            )

    try:
        check()
    except Unsatisfiable:
        pass  # nothing invalid can be generated for this operation (no parameters)


def last_tracebacks(server: ServerProcess, count: int = 3) -> str:
    """The server log's last tracebacks, for the failure message."""
    text = server.log_path.read_text(errors="replace")
    blocks = text.split("Traceback (most recent call last):")[1:]
    # Each traceback ends where the access log resumes.
    trimmed = [block.split("\nINFO:", 1)[0][-1500:] for block in blocks[-count:]]
    return "\n---\n".join(trimmed)


@pytest.mark.timeout(400)
def test_fuzzing_the_openapi_spec_finds_no_server_error(fuzz_server: ServerProcess) -> None:
    schema = schemathesis.openapi.from_url(f"{fuzz_server.url}/openapi.json")
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) > 30, "the spec lists fewer operations than the API has"
    report = FuzzReport()
    with requests.Session() as session:
        for operation in operations:
            for mode in MODES:
                fuzz_operation(operation, mode, fuzz_server.url, session, report)
    print(
        f"fuzz: {report.requests} requests over {len(operations)} operations; "
        f"timeouts: {sorted(set(report.timeouts))}"
    )
    assert not report.failures, (
        f"{len(report.failures)} server error(s):\n"
        + "\n".join(report.failures[:20])
        + f"\n\nserver tracebacks:\n{last_tracebacks(fuzz_server)}"
    )
