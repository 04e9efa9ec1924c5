"""A schemathesis fuzz pass over the OpenAPI spec of real servers: no input gets a 500; and
the hostile inputs of every operation (lone surrogates, NaN, Infinity, 1e400, deep nesting,
duplicate Authorization headers) get a JSON 4xx.

Every operation of /openapi.json gets a few generated requests, valid ones (positive) and
invalid ones (negative), checked with schemathesis' `not_a_server_error`. The servers are
dedicated: fuzzing calls bulk endpoints (cancel every run, delete...) that would disturb the
shared ones. The budget is bounded by MAX_EXAMPLES per operation and mode, not by a clock:
every operation is fuzzed however busy the machine is, and the test's timeout catches a hang.
Inputs are the same on every run unless RUNYARD_FUZZ_RANDOM=1.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from tests.support.databases import create_migrated_database, drop_database, postgres_available
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


@pytest.fixture(scope="module", params=["dev", "serve"])
def fuzz_server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    """A server of this module's own per backend: SQLite (dev) or a fresh PostgreSQL database
    (serve). Both tests use it: neither asserts on what the other left behind."""
    mode = request.param
    workdir = tmp_path_factory.mktemp(f"fuzz-{mode}")
    url = None
    env = {"RUNYARD_CRON_INTERVAL_SECONDS": "5"}
    if mode == "serve":
        if not postgres_available():
            pytest.fail("PostgreSQL is not reachable at 127.0.0.1:5432; start it (docs/testing.md)")
        url = create_migrated_database("runyard_fuzz")
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
    # The console's live stream sends snapshots until its client leaves: a generated request
    # to it would never end (its access rules: tests/integration/test_console.py).
    operations = [op for op in operations if op.path != "/console/api/live"]
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


# --- Hostile inputs on every operation ----------------------------------------------------

# JSON texts no stored JSON may hold (runyard/domain/json_bounds.py), each a value to put
# where an operation's body expects anything.
HOSTILE_VALUES = {
    "lone surrogate": '"\\ud800"',
    "lone surrogate key": '{"\\udc00": 1}',
    "NaN": "NaN",
    "Infinity": "-Infinity",
    "overflow": "1e400",
    "too deep": '{"a":' * 150 + "1" + "}" * 150,
}
# Query values: NaN, a percent-encoded lone surrogate (not UTF-8), an overflowing number.
HOSTILE_QUERIES = ("NaN", "%ED%A0%80", "1e400")
DEEP_BODY = "[" * 10_000 + "]" * 10_000


def concrete_path(path: str) -> str:
    """The path with every parameter filled: ids with a fresh UUID, the rest with a word."""
    parts = []
    for segment in path.split("/"):
        if segment.startswith("{"):
            segment = str(uuid.uuid4()) if segment.endswith("id}") else "word"
        parts.append(segment)
    return "/".join(parts)


def body_properties(operation: Any) -> list[str]:
    """The top-level properties of the operation's JSON body (at most four), if it has one."""
    content = (operation.definition.raw.get("requestBody") or {}).get("content", {})
    schema = (content.get("application/json") or {}).get("schema") or {}
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        schema = operation.schema.raw_schema["components"]["schemas"].get(name, {})
    return sorted(schema.get("properties") or {})[:4]


def hostile_requests(operation: Any) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(label, url path, httpx request arguments) of the hostile inputs for one operation."""
    method, path = operation.method.upper(), concrete_path(operation.path)
    twice = [("Authorization", "Bearer a"), ("Authorization", "Bearer b")]
    yield "two Authorization headers", path, {"headers": twice}
    for parameter in operation.definition.raw.get("parameters", []):
        if parameter.get("in") == "query":
            for value in HOSTILE_QUERIES:
                yield f"?{parameter['name']}={value}", f"{path}?{parameter['name']}={value}", {}
    if method not in ("POST", "PUT", "PATCH"):
        return
    json_type = {"Content-Type": "application/json"}
    yield "body 10,000 deep", path, {"content": DEEP_BODY, "headers": json_type}
    for name in body_properties(operation) or ["value"]:
        for label, value in HOSTILE_VALUES.items():
            body = '{"%s": %s}' % (name, value)  # noqa: UP031 (the value is a JSON text)
            yield f"{name}: {label}", path, {"content": body, "headers": json_type}


@pytest.mark.timeout(240)
async def test_hostile_inputs_on_every_operation_get_a_json_4xx(
    fuzz_server: ServerProcess,
) -> None:
    """Surrogates, NaN, Infinity, 1e400, deep nesting and duplicate Authorization headers, on
    every operation of the spec: never a 500, never an error body that is not JSON."""
    schema = schemathesis.openapi.from_url(f"{fuzz_server.url}/openapi.json")
    operations = [result.ok() for result in schema.get_all_operations()]
    failures: list[str] = []
    sent = 0
    async with httpx.AsyncClient(base_url=fuzz_server.url, timeout=REQUEST_TIMEOUT) as http:
        for operation in operations:
            method = operation.method.upper()
            for label, path, arguments in hostile_requests(operation):
                sent += 1
                response = await http.request(method, path, **arguments)
                kind = response.headers.get("content-type", "")
                if response.status_code >= 500 or (
                    response.status_code >= 400 and not kind.startswith("application/json")
                ):
                    failures.append(
                        f"{method} {operation.path} ({label}) -> {response.status_code} "
                        f"{kind} {response.text[:160]!r}"
                    )
    print(f"hostile inputs: {sent} requests over {len(operations)} operations")
    assert not failures, (
        f"{len(failures)} bad answer(s):\n"
        + "\n".join(failures[:30])
        + f"\n\nserver tracebacks:\n{last_tracebacks(fuzz_server)}"
    )
