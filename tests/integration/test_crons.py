"""Crons through langgraph-sdk: create, search, count, patch, delete, validation, and firing."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from runyard.graphs.registry import default_assistant_id
from tests.support.runs import new_tag, status_error

Sdk = Any

CRON_KEYS = {
    "cron_id",
    "assistant_id",
    "thread_id",
    "on_run_completed",
    "end_time",
    "schedule",
    "timezone",
    "created_at",
    "updated_at",
    "payload",
    "user_id",
    "next_run_date",
    "metadata",
    "enabled",
}
HOURLY = "0 * * * *"
EVERY_SECOND = "* * * * * *"


def parse_time(value: str) -> datetime:
    """An ISO 8601 timestamp, which must carry a zero UTC offset."""
    parsed = datetime.fromisoformat(value)
    offset = parsed.utcoffset()
    assert offset is not None and offset.total_seconds() == 0, value
    return parsed


def memory_input(namespace: list[str], value: Any = None) -> dict[str, Any]:
    """Input of the `memory` graph: write `value` (when given) and read it back."""
    return {"namespace": namespace, "key": "k", "write": value}


async def eventually(check: Callable[[], Awaitable[Any]], timeout: float, what: str) -> Any:
    """Poll an async check until it returns a truthy value; fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = await check()
        if result:
            return result
        await asyncio.sleep(0.1)
    pytest.fail(f"timed out after {timeout:g} s waiting for {what}")


async def thread_runs(client: Sdk, thread_id: str) -> list[dict[str, Any]]:
    """Every run of a thread."""
    return [dict(run) for run in await client.runs.list(thread_id, limit=1000)]


# --- create ------------------------------------------------------------------------------------


async def test_info_announces_crons(client: Sdk) -> None:
    info = await client.http.get("/info")
    assert info["flags"]["crons"] is True


async def test_create_a_thread_cron(client: Sdk) -> None:
    thread = await client.threads.create(metadata=new_tag())
    tag = new_tag()
    before = datetime.now(UTC)
    cron = await client.crons.create_for_thread(
        thread["thread_id"],
        "memory",
        schedule=HOURLY,
        input={"namespace": ["n"], "key": "k"},
        metadata=tag,
        config={"configurable": {"x": 1}},
        multitask_strategy="reject",
    )
    assert set(cron) == CRON_KEYS
    uuid.UUID(cron["cron_id"])
    assert cron["thread_id"] == thread["thread_id"]
    assert cron["assistant_id"] == default_assistant_id("memory")
    assert cron["schedule"] == HOURLY
    assert cron["metadata"] == tag
    assert cron["enabled"] is True
    assert cron["end_time"] is None and cron["timezone"] is None and cron["user_id"] is None
    assert cron["on_run_completed"] is None  # only stateless crons have one
    payload = cron["payload"]
    assert payload["input"] == {"namespace": ["n"], "key": "k"}
    assert payload["config"] == {"configurable": {"x": 1}}
    assert payload["multitask_strategy"] == "reject"
    assert payload["assistant_id"] == cron["assistant_id"]
    upcoming = parse_time(cron["next_run_date"])
    assert before < upcoming <= before + timedelta(hours=1)
    assert upcoming.minute == 0 and upcoming.second == 0
    parse_time(cron["created_at"])
    assert cron["created_at"] == cron["updated_at"]


async def test_create_a_stateless_cron_with_timezone_and_end_time(client: Sdk) -> None:
    end = datetime.now(UTC) + timedelta(days=30)
    cron = await client.crons.create(
        "memory",
        schedule="0 9 * * *",
        timezone="Asia/Tokyo",
        end_time=end,
        on_run_completed="keep",
        metadata=new_tag(),
    )
    assert cron["thread_id"] is None
    assert cron["on_run_completed"] == "keep"
    assert cron["timezone"] == "Asia/Tokyo"
    assert abs(parse_time(cron["end_time"]) - end) < timedelta(milliseconds=1)
    # 09:00 in Tokyo (UTC+9, no daylight saving) is 00:00 UTC.
    upcoming = parse_time(cron["next_run_date"])
    assert (upcoming.hour, upcoming.minute) == (0, 0)


async def test_stateless_cron_deletes_its_threads_by_default(client: Sdk) -> None:
    cron = await client.crons.create("memory", schedule=HOURLY, metadata=new_tag())
    assert cron["on_run_completed"] == "delete"


async def test_create_with_an_assistant_id(client: Sdk) -> None:
    assistant = await client.assistants.create("memory", metadata=new_tag())
    cron = await client.crons.create(assistant["assistant_id"], schedule=HOURLY)
    assert cron["assistant_id"] == assistant["assistant_id"]


# --- validation --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("schedule", "problem"),
    [("every hour", "Exactly 5, 6 or 7 columns"), ("99 * * * *", "out of range")],
)
async def test_bad_schedule_is_422_naming_it(client: Sdk, schedule: str, problem: str) -> None:
    status, detail = await status_error(client.crons.create("memory", schedule=schedule))
    assert status == 422
    assert schedule in detail and problem in detail


async def test_bad_timezone_is_422_naming_it(client: Sdk) -> None:
    status, detail = await status_error(
        client.crons.create("memory", schedule=HOURLY, timezone="Mars/Olympus")
    )
    assert status == 422
    assert "Mars/Olympus" in detail and "IANA" in detail


async def test_unknown_assistant_and_thread_are_404(client: Sdk) -> None:
    status, _ = await status_error(client.crons.create(str(uuid.uuid4()), schedule=HOURLY))
    assert status == 404
    status, _ = await status_error(client.crons.create("no-such-graph", schedule=HOURLY))
    assert status == 404
    missing_thread = str(uuid.uuid4())
    status, detail = await status_error(
        client.crons.create_for_thread(missing_thread, "memory", schedule=HOURLY)
    )
    assert status == 404
    assert missing_thread in detail


async def test_malformed_bodies_and_ids_are_422(base_url: str) -> None:
    async with httpx.AsyncClient(base_url=base_url) as http:
        no_schedule = await http.post("/runs/crons", json={"assistant_id": "memory"})
        bad_option = await http.post(
            "/runs/crons",
            json={"assistant_id": "memory", "schedule": HOURLY, "on_run_completed": "maybe"},
        )
        bad_id = await http.patch("/runs/crons/not-a-uuid", json={"enabled": False})
    assert no_schedule.status_code == 422 and "schedule" in no_schedule.json()["detail"]
    assert bad_option.status_code == 422 and "on_run_completed" in bad_option.json()["detail"]
    assert bad_id.status_code == 422


# --- search and count --------------------------------------------------------------------------


async def test_search_and_count_filter_by_metadata_thread_assistant_enabled(client: Sdk) -> None:
    tag = new_tag()
    thread = await client.threads.create(metadata=new_tag())
    on_thread = await client.crons.create_for_thread(
        thread["thread_id"], "memory", schedule=HOURLY, metadata=tag
    )
    stateless = await client.crons.create("memory", schedule=HOURLY, metadata=tag)
    disabled = await client.crons.create("slow", schedule=HOURLY, metadata=tag, enabled=False)

    def ids(crons: list[Any]) -> set[str]:
        return {c["cron_id"] for c in crons}

    everything = {on_thread["cron_id"], stateless["cron_id"], disabled["cron_id"]}
    assert ids(await client.crons.search(metadata=tag)) == everything
    assert await client.crons.count(metadata=tag) == 3
    by_thread = await client.crons.search(thread_id=thread["thread_id"])
    assert ids(by_thread) == {on_thread["cron_id"]}
    assert await client.crons.count(thread_id=thread["thread_id"]) == 1
    memory_only = await client.crons.search(metadata=tag, assistant_id="memory")
    assert ids(memory_only) == {on_thread["cron_id"], stateless["cron_id"]}
    assert await client.crons.count(metadata=tag, assistant_id=default_assistant_id("slow")) == 1
    assert ids(await client.crons.search(metadata=tag, enabled=False)) == {disabled["cron_id"]}
    assert ids(await client.crons.search(metadata=tag, enabled=True)) == everything - {
        disabled["cron_id"]
    }


async def test_search_pages_sorts_and_selects(client: Sdk, base_url: str) -> None:
    tag = new_tag()
    made = [
        await client.crons.create("memory", schedule=schedule, metadata=tag)
        for schedule in ("0 0 1 1 *", "* * * * *", "0 * * * *")
    ]
    by_next = await client.crons.search(metadata=tag, sort_by="next_run_date", sort_order="asc")
    assert [c["cron_id"] for c in by_next] == [made[i]["cron_id"] for i in (1, 2, 0)]
    newest_first = await client.crons.search(metadata=tag)
    assert [c["cron_id"] for c in newest_first] == [c["cron_id"] for c in reversed(made)]

    async with httpx.AsyncClient(base_url=base_url) as http:
        first = await http.post("/runs/crons/search", json={"metadata": tag, "limit": 2})
        rest = await http.post(
            "/runs/crons/search", json={"metadata": tag, "limit": 2, "offset": 2}
        )
    assert len(first.json()) == 2 and first.headers["X-Pagination-Next"] == "2"
    assert len(rest.json()) == 1 and "X-Pagination-Next" not in rest.headers
    assert rest.headers["X-Pagination-Total"] == "3"

    slim = await client.crons.search(metadata=tag, select=["cron_id", "schedule"])
    assert all(set(c) == {"cron_id", "schedule"} for c in slim)


async def test_search_rejects_unknown_sort_and_select(base_url: str) -> None:
    async with httpx.AsyncClient(base_url=base_url) as http:
        sort = await http.post("/runs/crons/search", json={"sort_by": "schedule"})
        select = await http.post("/runs/crons/search", json={"select": ["password"]})
    assert sort.status_code == 422 and "sort_by" in sort.json()["detail"]
    assert select.status_code == 422 and "select" in select.json()["detail"]


# --- patch and delete --------------------------------------------------------------------------


async def test_patch_reschedules_and_merges(client: Sdk) -> None:
    cron = await client.crons.create(
        "memory",
        schedule="0 0 1 1 *",
        input={"namespace": ["a"], "key": "k"},
        metadata={**new_tag(), "owner": "ann"},
        end_time=datetime.now(UTC) + timedelta(days=365 * 3),
    )
    patched = await client.crons.update(
        cron["cron_id"],
        schedule=HOURLY,
        metadata={"team": "ops"},
        input={"namespace": ["b"], "key": "k"},
        end_time=None,
        on_run_completed="keep",
    )
    assert patched["cron_id"] == cron["cron_id"]
    assert patched["schedule"] == HOURLY
    assert parse_time(patched["next_run_date"]) - datetime.now(UTC) <= timedelta(hours=1)
    assert patched["metadata"] == {**cron["metadata"], "team": "ops"}
    assert patched["payload"]["input"] == {"namespace": ["b"], "key": "k"}
    assert patched["payload"]["assistant_id"] == cron["assistant_id"]
    assert patched["end_time"] is None
    assert patched["on_run_completed"] == "keep"
    assert parse_time(patched["updated_at"]) > parse_time(cron["updated_at"])
    assert await client.crons.search(metadata={"team": "ops", **new_tag()}) == []


async def test_patch_timezone_and_disable(client: Sdk) -> None:
    cron = await client.crons.create("memory", schedule="0 9 * * *", metadata=new_tag())
    assert parse_time(cron["next_run_date"]).hour == 9
    patched = await client.crons.update(cron["cron_id"], timezone="Asia/Tokyo", enabled=False)
    assert patched["timezone"] == "Asia/Tokyo"
    assert parse_time(patched["next_run_date"]).hour == 0
    assert patched["enabled"] is False


async def test_patch_validation(client: Sdk) -> None:
    thread = await client.threads.create(metadata=new_tag())
    cron = await client.crons.create_for_thread(thread["thread_id"], "memory", schedule=HOURLY)
    status, detail = await status_error(client.crons.update(cron["cron_id"], schedule="nope"))
    assert status == 422 and "nope" in detail
    status, detail = await status_error(client.crons.update(cron["cron_id"], timezone="Nowhere"))
    assert status == 422 and "Nowhere" in detail
    status, detail = await status_error(client.crons.update(cron["cron_id"]))
    assert status == 422 and "nothing to update" in detail
    status, detail = await status_error(
        client.crons.update(cron["cron_id"], on_run_completed="keep")
    )
    assert status == 422 and "stateless" in detail
    status, _ = await status_error(client.crons.update(str(uuid.uuid4()), enabled=False))
    assert status == 404


async def test_delete(client: Sdk, base_url: str) -> None:
    cron = await client.crons.create("memory", schedule=HOURLY, metadata=new_tag())
    await client.crons.delete(cron["cron_id"])
    async with httpx.AsyncClient(base_url=base_url) as http:
        assert (await http.get(f"/runs/crons/{cron['cron_id']}")).status_code == 404
    status, _ = await status_error(client.crons.delete(cron["cron_id"]))
    assert status == 404
    assert await client.crons.count(metadata=cron["metadata"]) == 0


async def test_deleting_the_thread_deletes_its_crons(client: Sdk) -> None:
    thread = await client.threads.create(metadata=new_tag())
    await client.crons.create_for_thread(thread["thread_id"], "memory", schedule=HOURLY)
    assert await client.crons.count(thread_id=thread["thread_id"]) == 1
    await client.threads.delete(thread["thread_id"])
    assert await client.crons.count(thread_id=thread["thread_id"]) == 0


# --- firing ------------------------------------------------------------------------------------


async def test_thread_cron_fires_every_second_as_ordinary_runs(client: Sdk) -> None:
    thread = await client.threads.create(metadata=new_tag())
    namespace = [f"c{uuid.uuid4().hex[:12]}"]
    cron = await client.crons.create_for_thread(
        thread["thread_id"],
        "memory",
        schedule=EVERY_SECOND,
        input=memory_input(namespace, {"from": "cron"}),
        metadata={"origin": "test"},
    )

    async def two_runs() -> list[dict[str, Any]] | None:
        runs = await thread_runs(client, thread["thread_id"])
        return runs if len(runs) >= 2 else None

    runs = await eventually(two_runs, 10, "two runs of the per-second cron")
    await client.crons.delete(cron["cron_id"])
    occurrences = [run["metadata"]["cron_scheduled_for"] for run in runs]
    assert len(set(occurrences)) == len(occurrences), "an occurrence fired twice"
    for run in runs:
        assert run["metadata"]["cron_id"] == cron["cron_id"]
        assert run["metadata"]["origin"] == "test"
        assert run["assistant_id"] == cron["assistant_id"]
        assert parse_time(run["metadata"]["cron_scheduled_for"]).microsecond == 0
        done = await client.runs.join(thread["thread_id"], run["run_id"])
        assert done["found"] == {"from": "cron"}
    item = await client.store.get_item(namespace, "k")
    assert item is not None and item["value"] == {"from": "cron"}

    await asyncio.sleep(0.5)  # a firing claimed just before the delete may still land
    settled = len(await thread_runs(client, thread["thread_id"]))
    await asyncio.sleep(2.2)
    assert len(await thread_runs(client, thread["thread_id"])) == settled


async def test_stateless_cron_keeps_or_deletes_its_threads(client: Sdk) -> None:
    keeper = await client.assistants.create("memory", metadata=new_tag())
    deleter = await client.assistants.create("memory", metadata=new_tag())
    kept_space, deleted_space = [f"k{uuid.uuid4().hex[:12]}"], [f"d{uuid.uuid4().hex[:12]}"]
    crons = [
        await client.crons.create(
            keeper["assistant_id"],
            schedule=EVERY_SECOND,
            input=memory_input(kept_space, {"kept": True}),
            on_run_completed="keep",
        ),
        await client.crons.create(
            deleter["assistant_id"],
            schedule=EVERY_SECOND,
            input=memory_input(deleted_space, {"kept": False}),
        ),
    ]

    async def both_fired() -> bool:
        kept = await client.store.get_item(kept_space, "k")
        deleted = await client.store.get_item(deleted_space, "k")
        return kept is not None and deleted is not None

    await eventually(both_fired, 10, "both stateless crons to run their graph")
    for cron in crons:
        await client.crons.delete(cron["cron_id"])

    kept_threads = await client.threads.search(metadata={"assistant_id": keeper["assistant_id"]})
    assert kept_threads, "on_run_completed='keep' must leave the run's thread"
    runs = await client.runs.list(kept_threads[0]["thread_id"])
    assert runs[0]["metadata"]["cron_id"] == crons[0]["cron_id"]

    async def no_threads_left() -> bool:
        left = await client.threads.search(metadata={"assistant_id": deleter["assistant_id"]})
        return not left

    await eventually(no_threads_left, 10, "the default 'delete' to remove the run's threads")


async def test_disabled_cron_does_not_fire_until_enabled(client: Sdk) -> None:
    thread = await client.threads.create(metadata=new_tag())
    cron = await client.crons.create_for_thread(
        thread["thread_id"],
        "memory",
        schedule=EVERY_SECOND,
        enabled=False,
        input=memory_input(["unused"]),
    )
    await asyncio.sleep(2.2)
    assert await thread_runs(client, thread["thread_id"]) == []
    await client.crons.update(cron["cron_id"], enabled=True)

    async def fired() -> bool:
        return bool(await thread_runs(client, thread["thread_id"]))

    await eventually(fired, 10, "the re-enabled cron to fire")
    await client.crons.delete(cron["cron_id"])


async def test_cron_stops_at_its_end_time(client: Sdk, base_url: str) -> None:
    thread = await client.threads.create(metadata=new_tag())
    end = datetime.now(UTC) + timedelta(seconds=2)
    cron = await client.crons.create_for_thread(
        thread["thread_id"],
        "memory",
        schedule=EVERY_SECOND,
        end_time=end,
        input=memory_input(["unused"]),
    )

    async with httpx.AsyncClient(base_url=base_url) as http:

        async def finished() -> bool:
            current = (await http.get(f"/runs/crons/{cron['cron_id']}")).json()
            return current["next_run_date"] is None

        await eventually(finished, 10, "the cron to pass its end time")
    # The last firing moves next_run_date before it creates its run: let it land.
    await asyncio.sleep(1)
    runs = await thread_runs(client, thread["thread_id"])
    assert 1 <= len(runs) <= 3, [r["metadata"]["cron_scheduled_for"] for r in runs]
    assert all(parse_time(r["metadata"]["cron_scheduled_for"]) <= end for r in runs)
    await asyncio.sleep(1.5)
    assert len(await thread_runs(client, thread["thread_id"])) == len(runs)


async def test_busy_thread_with_reject_skips_the_occurrence(client: Sdk) -> None:
    thread = await client.threads.create(metadata=new_tag())
    blocker = await client.runs.create(thread["thread_id"], "slow", input={"seconds": 2})
    cron = await client.crons.create_for_thread(
        thread["thread_id"],
        "memory",
        schedule=EVERY_SECOND,
        multitask_strategy="reject",
        input=memory_input(["unused"]),
    )
    await asyncio.sleep(1.5)
    await client.crons.delete(cron["cron_id"])
    await asyncio.sleep(0.3)
    runs = await thread_runs(client, thread["thread_id"])
    assert [r["run_id"] for r in runs] == [blocker["run_id"]]
