"""The `session` scenario: the thread streaming session's server cost per run, beside the
legacy `/runs/stream`, measured in the same bench run.

A session run is what `client.threads.stream()` does for one run: `run.start` on a thread
the client minted, then `POST /threads/{id}/stream/events` read until the root lifecycle
says the run completed. A legacy run is one stateless `POST /runs/stream` (values). The two
alternate in rounds, each leg between two scrapes of every instance's CPU counter, so both
meet the same host conditions; the figures are the server CPU per run of each path and
their ratio.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

from bench import cost
from bench.scenarios import Sample, Target, in_parallel, stream_run, summary

ROUNDS = 4
CHANNELS = ["values", "lifecycle", "input"]


async def session_run(target: Target, sample: Sample) -> None:
    """One run through the session: a command starts it, its events are read to the end."""
    thread_id = str(uuid.uuid4())
    started = time.perf_counter()
    command = {
        "id": 1,
        "method": "run.start",
        "params": {"assistant_id": target.assistant_id, "input": target.input},
    }
    reply = await target.client.post(f"/threads/{thread_id}/commands", json=command)
    if reply.status_code != 200 or reply.json().get("type") != "success":
        sample.failed(f"run.start HTTP {reply.status_code}: {reply.text[:300]}")
        return
    outcome = await _read_to_end(target, thread_id)
    if outcome != "completed":
        sample.failed(f"session stream ended with {outcome}")
        return
    sample.latencies.append(time.perf_counter() - started)


async def _read_to_end(target: Target, thread_id: str) -> str:
    """The root's last lifecycle phase, reading the stream until the run has ended."""
    path = f"/threads/{thread_id}/stream/events"
    async with target.client.stream("POST", path, json={"channels": CHANNELS}) as response:
        if response.status_code != 200:
            await response.aread()
            return f"HTTP {response.status_code}: {response.text[:300]}"
        async for line in response.aiter_lines():
            if not line.startswith("data:") or '"lifecycle"' not in line:
                continue
            event = json.loads(line[5:])
            params = event.get("params") or {}
            phase = (params.get("data") or {}).get("event")
            if not params.get("namespace") and phase in ("completed", "failed"):
                return str(phase)
    return "the stream closing before the run ended"


async def session_cost(target: Target, runs: int) -> dict[str, Any]:
    """Server CPU per run of the session path and of /runs/stream, alternating legs."""
    per_leg = max(1, runs // ROUNDS)
    cpu = {"session": 0.0, "legacy": 0.0}
    done = {"session": 0, "legacy": 0}
    session, legacy_first, legacy_done = Sample(), Sample(), Sample()
    for _ in range(ROUNDS):
        for name in ("legacy", "session"):
            before = await cost.scrape(target.urls)
            if name == "session":
                await in_parallel(per_leg, target.concurrency, lambda: session_run(target, session))
            else:
                await in_parallel(
                    per_leg,
                    target.concurrency,
                    lambda: stream_run(target, legacy_first, legacy_done),
                )
            after = await cost.scrape(target.urls)
            figures = cost.server_cost(before, after, per_leg)
            if figures is None or figures["cpu_ms_per_run"] is None:
                raise RuntimeError("the servers' CPU counters could not be read")
            cpu[name] += figures["cpu_ms_per_run"] * per_leg
            done[name] += per_leg
    session_ms = cpu["session"] / done["session"]
    legacy_ms = cpu["legacy"] / done["legacy"]
    return {
        "session_cpu_ms_per_run": round(session_ms, 3),
        "runs_stream_cpu_ms_per_run": round(legacy_ms, 3),
        "session_over_runs_stream": round(session_ms / legacy_ms, 3) if legacy_ms else None,
        "session": summary(session),
        "runs_stream_end_p50_ms": summary(legacy_done)["p50_ms"],
        "errors": len(session.errors) + len(legacy_first.errors),
        "concurrency": target.concurrency,
    }
