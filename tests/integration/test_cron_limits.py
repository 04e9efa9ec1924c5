"""The operator's bounds on crons: a minimum interval between firings and a cap on the crons
of one user, enabled or not, each refused with a 422 naming the setting, before anything is
stored.

The suite's servers fire crons every second (tests/support/server.py sets the interval to one
second); this module's server keeps the default minimum of one minute."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.auth import AUTH_CONFIG
from tests.support.backends import backend_server
from tests.support.server import ServerProcess

CAP = 3
TOKEN = {"Authorization": "Bearer user-a"}
OTHER = {"Authorization": "Bearer user-b"}


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def limited_server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    """A server with auth (crons belong to users), the default minimum interval, a cap of 3."""
    workdir: Path = tmp_path_factory.mktemp(f"cron-limits-{request.param}")
    env = {"RUNYARD_CRON_MIN_INTERVAL_SECONDS": "60", "RUNYARD_MAX_CRONS_PER_USER": str(CAP)}
    with backend_server(request.param, workdir, config=AUTH_CONFIG, env=env) as proc:
        yield proc


async def own_assistant(http: httpx.AsyncClient) -> str:
    """An assistant of the caller's (the test auth handlers hide the default ones)."""
    created = await http.post("/assistants", json={"graph_id": "agent"})
    assert created.status_code == 200, created.text
    return str(created.json()["assistant_id"])


@pytest.mark.parametrize("schedule", ["* * * * * *", "*/30 * * * * *", "0,1 * * * * *"])
async def test_a_schedule_more_often_than_the_minimum_is_refused(
    limited_server: ServerProcess, schedule: str
) -> None:
    async with httpx.AsyncClient(base_url=limited_server.url, timeout=30, headers=TOKEN) as http:
        assistant_id = await own_assistant(http)
        refused = await http.post(
            "/runs/crons", json={"assistant_id": assistant_id, "schedule": schedule}
        )
        assert refused.status_code == 422, refused.text
        detail = refused.json()["detail"]
        assert "RUNYARD_CRON_MIN_INTERVAL_SECONDS" in detail and "60" in detail, detail
        assert (
            await http.post("/runs/crons/count", json={"assistant_id": assistant_id})
        ).json() == 0

        cron = await http.post(
            "/runs/crons", json={"assistant_id": assistant_id, "schedule": "0 * * * *"}
        )
        assert cron.status_code == 200, cron.text
        cron_id = cron.json()["cron_id"]
        patched = await http.patch(f"/runs/crons/{cron_id}", json={"schedule": schedule})
        assert patched.status_code == 422, patched.text
        assert "RUNYARD_CRON_MIN_INTERVAL_SECONDS" in patched.json()["detail"]
        assert (await http.get(f"/runs/crons/{cron_id}")).json()["schedule"] == "0 * * * *"
        assert (await http.delete(f"/runs/crons/{cron_id}")).status_code == 204


async def test_crons_per_user_are_capped_enabled_or_not(limited_server: ServerProcess) -> None:
    async with (
        httpx.AsyncClient(base_url=limited_server.url, timeout=30, headers=TOKEN) as a,
        httpx.AsyncClient(base_url=limited_server.url, timeout=30, headers=OTHER) as b,
    ):
        # Every minute: the minimum interval exactly.
        body = {"assistant_id": await own_assistant(a), "schedule": "* * * * *"}
        made = [await a.post("/runs/crons", json=body) for _ in range(CAP - 1)]
        made.append(await a.post("/runs/crons", json={**body, "enabled": False}))
        assert [r.status_code for r in made] == [200] * CAP, [r.text for r in made]
        for extra in (body, {**body, "enabled": False}):
            over = await a.post("/runs/crons", json=extra)
            assert over.status_code == 422, over.text
            assert "RUNYARD_MAX_CRONS_PER_USER" in over.json()["detail"]
            assert str(CAP) in over.json()["detail"]
        assert (await a.post("/runs/crons/count", json={})).json() == CAP

        # Another user has a cap of their own.
        theirs = {**body, "assistant_id": await own_assistant(b)}
        assert (await b.post("/runs/crons", json=theirs)).status_code == 200
        # Enabling a disabled one takes no more room; disabling one makes none.
        disabled = made[-1].json()["cron_id"]
        enabling = await a.patch(f"/runs/crons/{disabled}", json={"enabled": True})
        assert enabling.status_code == 200, enabling.text
        first = made[0].json()["cron_id"]
        assert (await a.patch(f"/runs/crons/{first}", json={"enabled": False})).status_code == 200
        assert (await a.post("/runs/crons", json=body)).status_code == 422

        # Deleting one does.
        assert (await a.delete(f"/runs/crons/{first}")).status_code == 204
        assert (await a.post("/runs/crons", json=body)).status_code == 200


async def test_concurrent_creates_do_not_pass_the_cap(limited_server: ServerProcess) -> None:
    async with httpx.AsyncClient(base_url=limited_server.url, timeout=30, headers=OTHER) as b:
        mine = await b.post("/runs/crons/search", json={"limit": 100})
        for cron in mine.json():
            assert (await b.delete(f"/runs/crons/{cron['cron_id']}")).status_code == 204
        body = {"assistant_id": await own_assistant(b), "schedule": "0 * * * *"}
        answers = await asyncio.gather(*(b.post("/runs/crons", json=body) for _ in range(8)))
        statuses = sorted(answer.status_code for answer in answers)
        assert statuses == [200] * CAP + [422] * (8 - CAP), [a.text for a in answers]
        assert (await b.post("/runs/crons/count", json={})).json() == CAP
