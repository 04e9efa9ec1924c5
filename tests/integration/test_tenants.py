"""What one tenant names never reaches another: idempotency keys are the caller's, fairness
groups come from the authenticated user, `/metrics` needs a token of its own, and a user's
pending runs are bounded. Users of the tenants' auth handlers (tests/graphs/auth_tenants.py)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from runyard.app.factory import create_app
from runyard.domain.errors import ConfigError
from runyard.settings import Settings
from tests.support.backends import backend_runtime, backend_server
from tests.support.server import ROOT, ServerProcess

pytestmark = pytest.mark.timeout(120)

TENANTS_CONFIG = ROOT / "tests" / "graphs" / "langgraph_auth_tenants.json"
METRICS_TOKEN = "metrics-" + "s" * 24
PENDING_CAP = 4
LATER = 3600.0  # a run scheduled this far ahead stays pending through the test
QUICK = {"assistant_id": "pipeline", "input": {"text": "a b"}}


def bearer(user: str) -> dict[str, str]:
    """The test handlers' credentials of `user`."""
    return {"Authorization": f"Bearer {user}"}


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def tenant_server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    """A server with the tenants' auth handlers, a group per user, a metrics token and a
    small bound on pending runs (beside its default, which test_limits.py keeps)."""
    workdir: Path = tmp_path_factory.mktemp(f"tenants-{request.param}")
    env = {
        "RUNYARD_METRICS_TOKEN": METRICS_TOKEN,
        "RUNYARD_FAIRNESS_KEY": "langgraph_auth_user_id",
        "RUNYARD_MAX_PENDING_RUNS_PER_GROUP": str(PENDING_CAP),
    }
    with backend_server(request.param, workdir, config=TENANTS_CONFIG, env=env) as proc:
        yield proc


@pytest.fixture
async def as_user(
    tenant_server: ServerProcess,
) -> AsyncIterator[Callable[[str], httpx.AsyncClient]]:
    """Plain HTTP clients, one per user named."""
    opened: dict[str, httpx.AsyncClient] = {}

    def client(user: str) -> httpx.AsyncClient:
        if user not in opened:
            opened[user] = httpx.AsyncClient(
                base_url=tenant_server.url, timeout=30, headers=bearer(user)
            )
        return opened[user]

    try:
        yield client
    finally:
        for http in opened.values():
            await http.aclose()


async def groups_pending(http: httpx.AsyncClient) -> dict[str, int]:
    """Pending runs per fairness group, as the operator's scrape sees them."""
    auth = {"Authorization": f"Bearer {METRICS_TOKEN}"}
    answer = await http.get("/metrics", params={"format": "json"}, headers=auth)
    assert answer.status_code == 200, answer.text
    return {g["group"]: g["n_pending"] for g in answer.json()["queue"]["groups"]}


async def cancel(http: httpx.AsyncClient, runs: list[dict[str, Any]]) -> None:
    """Cancel runs left pending, so that their user's group is empty again."""
    for run in runs:
        path = f"/threads/{run['thread_id']}/runs/{run['run_id']}/cancel"
        answer = await http.post(path)
        assert answer.status_code in (200, 202), answer.text


def run_id_of(answer: httpx.Response) -> str:
    """The run a /runs/wait answer belongs to (its Content-Location)."""
    return answer.headers["content-location"].rsplit("/", 1)[-1]


# --- idempotency keys ---------------------------------------------------------------------


async def test_another_users_identical_request_is_a_new_run(
    as_user: Callable[[str], httpx.AsyncClient],
) -> None:
    bob, bea = as_user("bob"), as_user("bea")
    key = {"Idempotency-Key": f"order-{uuid.uuid4().hex[:8]}"}
    # The probe: the very same /runs/wait and key from another user.
    bobs = await bob.post("/runs/wait", json=QUICK, headers=key)
    beas = await bea.post("/runs/wait", json=QUICK, headers=key)
    assert bobs.status_code == beas.status_code == 200, (bobs.text, beas.text)
    assert run_id_of(beas) != run_id_of(bobs)

    # A background run (kept pending, so that it outlives the retries): bea's own new run,
    # and nothing of bob's in her answer.
    key = {"Idempotency-Key": f"order-{uuid.uuid4().hex[:8]}"}
    later = {**QUICK, "after_seconds": LATER}
    first = await bob.post("/runs", json=later, headers=key)
    theirs = await bea.post("/runs", json=later, headers=key)
    try:
        assert first.status_code == theirs.status_code == 200, (first.text, theirs.text)
        assert theirs.json()["run_id"] != first.json()["run_id"]
        assert "bob" not in theirs.text
        user = theirs.json()["kwargs"]["config"]["configurable"]["langgraph_auth_user_id"]
        assert user == "bea"
        # Each user's retry is their own run still.
        for http, mine in ((bob, first), (bea, theirs)):
            again = await http.post("/runs", json=later, headers=key)
            assert again.json()["run_id"] == mine.json()["run_id"], again.text
    finally:
        await cancel(bob, [first.json()])
        await cancel(bea, [theirs.json()])


async def test_another_users_key_with_another_body_says_nothing_of_the_first(
    as_user: Callable[[str], httpx.AsyncClient],
) -> None:
    ann, bob = as_user("ann"), as_user("bob")
    key = {"Idempotency-Key": f"order-{uuid.uuid4().hex[:8]}"}
    body = {**QUICK, "if_not_exists": "create"}
    first = await ann.post(f"/threads/{uuid.uuid4()}/runs", json=body, headers=key)
    assert first.status_code == 200, first.text

    other = {**body, "input": {"text": "something else"}}
    thread = str(uuid.uuid4())
    theirs = await bob.post(f"/threads/{thread}/runs", json=other, headers=key)
    assert theirs.status_code == 200, theirs.text
    assert theirs.json()["thread_id"] == thread
    # The key is still ann's: her own other request under it is her conflict.
    conflict = await ann.post(f"/threads/{uuid.uuid4()}/runs", json=other, headers=key)
    assert conflict.status_code == 409, conflict.text
    assert "Idempotency-Key" in conflict.json()["detail"]


async def test_members_of_one_owner_filter_share_their_keys(
    as_user: Callable[[str], httpx.AsyncClient],
) -> None:
    """The handler's filter is the scope, as an account is Stripe's: ann's run is amy's to
    see already, and amy's retry of the same request is that run."""
    ann, amy = as_user("ann"), as_user("amy")
    key = {"Idempotency-Key": f"order-{uuid.uuid4().hex[:8]}"}
    first = await ann.post("/runs", json=QUICK, headers=key)
    assert first.status_code == 200, first.text
    again = await amy.post("/runs", json=QUICK, headers=key)
    assert again.status_code == 200, again.text
    assert again.json()["run_id"] == first.json()["run_id"]
    other = await amy.post("/runs", json={**QUICK, "input": {"text": "c"}}, headers=key)
    assert other.status_code == 409, other.text


# --- fairness groups ----------------------------------------------------------------------


async def test_client_metadata_never_chooses_the_fairness_group(
    as_user: Callable[[str], httpx.AsyncClient],
) -> None:
    bob = as_user("bob")
    # What a client could send to pass for bea.
    metadata = {"langgraph_auth_user_id": "bea", "org_id": "bea"}
    body = {**QUICK, "after_seconds": LATER, "metadata": metadata}
    created = await bob.post("/runs", json=body)
    assert created.status_code == 200, created.text
    try:
        pending = await groups_pending(bob)
        assert pending.get("bob") == 1, pending
        assert "bea" not in pending, pending
    finally:
        await cancel(bob, [created.json()])


async def test_a_metadata_fairness_key_with_auth_is_refused_at_start(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as refused:
        async with backend_runtime(
            "sqlite", tmp_path, config=TENANTS_CONFIG, RUNYARD_FAIRNESS_KEY="org_id"
        ):
            pass
    message = refused.value.message
    assert "RUNYARD_FAIRNESS_KEY" in message and "org_id" in message
    assert "langgraph_auth_user_id" in message and "priority.path" in message


# --- /metrics -----------------------------------------------------------------------------


async def test_metrics_need_their_own_token(tenant_server: ServerProcess) -> None:
    async with httpx.AsyncClient(base_url=tenant_server.url, timeout=30) as http:
        for path in ("/metrics", "/metrics?format=json"):
            for headers in ({}, bearer("bob"), bearer("wrong-token")):
                refused = await http.get(path, headers=headers)
                assert refused.status_code == 401, (path, headers, refused.text)
                assert "RUNYARD_METRICS_TOKEN" in refused.json()["detail"]
                assert "runyard_" not in refused.text
        scraped = await http.get("/metrics", headers=bearer(METRICS_TOKEN))
        assert scraped.status_code == 200, scraped.text
        assert "runyard_queue_depth" in scraped.text


async def test_with_auth_and_no_token_metrics_are_closed(tmp_path: Path) -> None:
    settings = Settings(RUNYARD_CONFIG=TENANTS_CONFIG, RUNYARD_DATA_DIR=tmp_path / "data")
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://runyard") as http:
            for headers in ({}, bearer("bob")):
                closed = await http.get("/metrics", headers=headers)
                assert closed.status_code == 403, closed.text
                assert "RUNYARD_METRICS_TOKEN" in closed.json()["detail"]
            assert (await http.get("/ok")).status_code == 200


# --- pending runs per group ---------------------------------------------------------------


async def test_pending_runs_of_one_user_are_bounded(
    as_user: Callable[[str], httpx.AsyncClient],
) -> None:
    bob, bea = as_user("bob"), as_user("bea")
    body = {**QUICK, "after_seconds": LATER}
    mine: list[dict[str, Any]] = []
    theirs: list[dict[str, Any]] = []
    try:
        for _ in range(PENDING_CAP):
            created = await bob.post("/runs", json=body)
            assert created.status_code == 200, created.text
            mine.append(created.json())
        over = await bob.post("/runs", json=body)
        assert over.status_code == 429, over.text
        detail = over.json()["detail"]
        assert "RUNYARD_MAX_PENDING_RUNS_PER_GROUP" in detail and str(PENDING_CAP) in detail
        # Another user's group has room of its own.
        created = await bea.post("/runs", json=body)
        assert created.status_code == 200, created.text
        theirs.append(created.json())
        # A batch that would pass the bound creates none of its runs.
        batch = await bea.post("/runs/batch", json=[body] * PENDING_CAP)
        assert batch.status_code == 429, batch.text
        assert "RUNYARD_MAX_PENDING_RUNS_PER_GROUP" in batch.json()["detail"]
        assert (await groups_pending(bea)).get("bea") == 1
    finally:
        await cancel(bob, mine)
        await cancel(bea, theirs)
