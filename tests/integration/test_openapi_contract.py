"""The OpenAPI document describes the server: schemathesis `--checks all` finds nothing.

Every check schemathesis has runs against a real `runyard dev` of its own (the run calls bulk
endpoints that would disturb shared servers): the statuses each operation answers are
declared, with the body they really have (`{"detail": ...}`), `Allow` lists the methods of
the path, schema-valid requests are accepted and schema-violating ones refused. The rules a
JSON Schema cannot state are listed, each with its reason, in schemathesis.toml beside this
file. Inputs are deterministic, so a failure reproduces; the budget is a few examples per
operation.
"""

from __future__ import annotations

import re
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.server import ServerProcess

CONFIG = Path(__file__).with_name("schemathesis.toml")
MAX_EXAMPLES = 5
RUN_TIMEOUT_SECONDS = 240


@pytest.fixture
def contract_server(tmp_path: Path) -> Iterator[ServerProcess]:
    """A `runyard dev` server of its own, on SQLite."""
    proc = ServerProcess("dev", tmp_path).start()
    try:
        yield proc
    finally:
        proc.stop()


@pytest.mark.slow
@pytest.mark.timeout(RUN_TIMEOUT_SECONDS + 60)
def test_schemathesis_checks_all_find_nothing(
    contract_server: ServerProcess, tmp_path: Path
) -> None:
    command = [
        str(Path(sys.executable).with_name("schemathesis")),
        "--no-color",
        "--config-file",
        str(CONFIG),
        "run",
        f"{contract_server.url}/openapi.json",
        "--checks",
        "all",
        # Its stateful heuristic reads a 2xx to POST /a2a/{assistant_id} (JSON-RPC: 200 with a
        # JSON-RPC error for any id, nothing created) as creating what lies below that path,
        # and an unknown assistant's agent card (404) as a resource that vanished.
        "--exclude-checks",
        "ensure_resource_availability",
        # The console's live stream sends snapshots until its client leaves: a generated
        # request to it would never end (its access rules: tests/integration/test_console.py).
        "--exclude-path",
        "/console/api/live",
        # Draining the instance (whose id GET /console/api/fleet gives) would leave the rest
        # of the run to a server that claims nothing and answers /readyz with 503.
        "--exclude-path",
        "/console/api/instances/{instance_id}/drain",
        "--max-examples",
        str(MAX_EXAMPLES),
        "--generation-deterministic",
        "--request-timeout",
        "10",
    ]
    done = subprocess.run(
        command,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_SECONDS,
        check=False,
    )
    output = done.stdout + done.stderr
    tested = re.search(r"Tested: (\d+)", output)
    assert tested and int(tested.group(1)) > 30, output[-3000:]
    assert done.returncode == 0, output[-12000:]


# A thread id nobody creates, the same in every process: parallel workers collect the same
# test ids.
NO_SUCH_THREAD = "9c3e5a7b-1d2f-4e6a-8b0c-4d6f8a2c3e5b"


@pytest.mark.parametrize(
    ("method", "path", "allowed"),
    [
        ("PATCH", "/threads/search", "POST"),
        ("OPTIONS", f"/threads/{NO_SUCH_THREAD}", "DELETE, GET, HEAD, PATCH"),
        ("GET", f"/threads/{NO_SUCH_THREAD}/runs/crons", "POST"),
        ("DELETE", f"/threads/{NO_SUCH_THREAD}/history", "GET, HEAD, POST"),
    ],
)
def test_a_method_the_path_does_not_take_is_405_listing_the_path_methods(
    base_url: str, method: str, path: str, allowed: str
) -> None:
    response = httpx.request(method, f"{base_url}{path}", timeout=10)
    assert response.status_code == 405, response.text
    assert response.headers["allow"] == allowed
    assert method in response.json()["detail"]


def test_error_answers_are_declared_with_their_real_body(base_url: str) -> None:
    document = httpx.get(f"{base_url}/openapi.json", timeout=10).json()
    answers = document["paths"]["/threads/{thread_id}"]["get"]["responses"]
    assert {"404", "422"} <= set(answers)
    reference = answers["404"]["content"]["application/json"]["schema"]["$ref"]
    body = document["components"]["schemas"][reference.rsplit("/", 1)[-1]]
    assert body["required"] == ["detail"]
    assert body["properties"]["detail"]["type"] == "string"
    assert "HTTPValidationError" not in document["components"]["schemas"]
    missing = httpx.get(f"{base_url}/threads/{uuid.uuid4()}", timeout=10)
    assert missing.status_code == 404
    assert set(missing.json()) == {"detail"}


@pytest.mark.parametrize("path", ["/assistants/search", "/assistants/count"])
def test_an_unknown_graph_id_in_an_assistant_search_is_a_declared_404(
    base_url: str, path: str
) -> None:
    """langgraph dev 0.16.7 answers 404 to POST /assistants/search and /assistants/count
    with an unknown graph_id; the document declares that 404 with its body."""
    document = httpx.get(f"{base_url}/openapi.json", timeout=10).json()
    answers = document["paths"][path]["post"]["responses"]
    assert "404" in answers
    assert answers["404"]["content"]["application/json"]["schema"]["$ref"].endswith("ErrorBody")
    answer = httpx.post(f"{base_url}{path}", json={"graph_id": "no-such-graph"}, timeout=10)
    assert answer.status_code == 404
    assert "no-such-graph" in answer.json()["detail"]
