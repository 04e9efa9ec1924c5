"""The fairness scenario: how long a small tenant's runs wait behind a big tenant's backlog.

Leg `alone`: tenant B's runs (`/runs/wait`, `concurrency` at once) on an idle server. Leg
`behind_backlog`: tenant A first submits `BACKLOG_PER_RUN` background runs per B run, then
B's runs go as in the first leg while A's backlog drains. Runs carry `metadata.tenant`;
the server groups by it when started with `RUNYARD_FAIRNESS_KEY=tenant` (or a
`priority.path` that returns it as the fairness group). Without that, both tenants share
one group and B waits behind A's whole backlog, first come first served: run the scenario
both ways to compare. Figures are printed, never asserted.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

from bench.scenarios import Sample, Target, in_parallel, summary

# Background runs tenant A queues per run of tenant B in the second leg.
BACKLOG_PER_RUN = 20
# Submissions of A's backlog in flight at once.
SUBMIT_LANES = 20


def _body(target: Target, tenant: str) -> dict[str, Any]:
    metadata = {"tenant": tenant}
    return {"assistant_id": target.assistant_id, "input": target.input, "metadata": metadata}


async def _wait_as(target: Target, tenant: str, sample: Sample) -> None:
    started = time.perf_counter()
    response = await target.client.post("/runs/wait", json=_body(target, tenant))
    elapsed = time.perf_counter() - started
    if response.status_code != 200:
        sample.failed(f"wait HTTP {response.status_code}: {response.text[:300]}")
        return
    body = json.loads(response.content or b"null")
    if isinstance(body, dict) and "__error__" in body:
        sample.failed(f"run failed: {json.dumps(body['__error__'])[:300]}")
        return
    sample.latencies.append(elapsed)


async def fairness(target: Target, runs: int) -> dict[str, Any]:
    """B's /runs/wait latency alone, then behind A's backlog (see the module)."""
    tenant_a, tenant_b = f"a-{uuid.uuid4().hex[:6]}", f"b-{uuid.uuid4().hex[:6]}"
    alone = Sample()
    await in_parallel(runs, target.concurrency, lambda: _wait_as(target, tenant_b, alone))

    backlog = runs * BACKLOG_PER_RUN
    refused = Sample()

    async def submit() -> None:
        response = await target.client.post("/runs", json=_body(target, tenant_a))
        if response.status_code != 200:
            refused.failed(f"create HTTP {response.status_code}: {response.text[:300]}")

    submit_started = time.perf_counter()
    await in_parallel(backlog, SUBMIT_LANES, submit)
    submitted_s = time.perf_counter() - submit_started
    behind = Sample()
    await in_parallel(runs, target.concurrency, lambda: _wait_as(target, tenant_b, behind))
    alone_p50 = summary(alone)["p50_ms"]
    behind_p50 = summary(behind)["p50_ms"]
    return {
        "alone": summary(alone),
        "behind_backlog": {
            "backlog_runs": backlog,
            "submit_s": round(submitted_s, 2),
            **summary(behind),
        },
        "p50_ratio": round(behind_p50 / alone_p50, 2) if alone_p50 else None,
        "errors": len(alone.errors) + len(behind.errors) + len(refused.errors),
    }
