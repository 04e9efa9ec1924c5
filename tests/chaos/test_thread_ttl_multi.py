"""Every instance sweeps expired threads; each expired thread is deleted exactly once."""

from __future__ import annotations

import re

import pytest

from tests.chaos.cluster import Cluster, wait_until

THREADS = 30


@pytest.mark.slow
async def test_two_sweepers_delete_each_expired_thread_once(cluster: Cluster) -> None:
    first, second = cluster.instances
    thread_ids = []
    for index in range(THREADS):
        creator = first if index % 2 else second
        thread = await creator.client.threads.create(ttl=0.01)
        thread_ids.append(thread["thread_id"])
    keeper = await first.client.threads.create(ttl=600)

    async def all_gone() -> bool:
        for thread_id in thread_ids:
            response = await second.http.get(f"/threads/{thread_id}")
            if response.status_code != 404:
                return False
        return True

    await wait_until(all_gone, 60, "every expired thread to be deleted", interval=0.5)
    assert (await second.http.get(f"/threads/{keeper['thread_id']}")).status_code == 200
    expired: dict[str, int] = {}
    for instance in cluster.instances:
        log = instance.server.log_path.read_text()
        for thread_id in re.findall(r"thread_expired thread_id=(\S+) strategy=delete", log):
            expired[thread_id] = expired.get(thread_id, 0) + 1
    assert {t: expired.get(t, 0) for t in thread_ids} == dict.fromkeys(thread_ids, 1)
