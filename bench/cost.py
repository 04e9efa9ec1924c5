"""What a scenario cost the server: per-run deltas of each instance's /metrics (Prometheus text).

Runyard exposes process CPU time, its peak resident memory and the SQL statements it sent; a
server without these metrics (the official LangGraph server) gets `null` figures, never an error.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx

log = logging.getLogger("bench")

CPU_SECONDS = "process_cpu_seconds_total"
START_TIME = "process_start_time_seconds"
STATEMENTS = "runyard_db_statements_total"
PEAK_RSS = "runyard_process_peak_rss_bytes"
WANTED = frozenset({CPU_SECONDS, START_TIME, STATEMENTS, PEAK_RSS})

SCRAPE_TIMEOUT_SECONDS = 10.0

# `name{label="value",...} value [timestamp]`; label values may hold escaped quotes.
_SAMPLE = re.compile(
    r'^(?P<name>[A-Za-z_:][A-Za-z0-9_:]*)(?:\{(?P<labels>(?:[^"}]|"(?:[^"\\]|\\.)*")*)\})?'
    r"\s+(?P<value>\S+)"
)
_LABEL = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"')


@dataclass(frozen=True)
class Snapshot:
    """The figures one instance's /metrics gave at one moment; None where it lacks the metric."""

    cpu_s: float | None = None
    start_time: float | None = None
    peak_rss_bytes: float | None = None
    statements: dict[str, float] = field(default_factory=dict)

    @property
    def useful(self) -> bool:
        """Whether the instance exposes any of the cost metrics at all."""
        return (
            self.cpu_s is not None or self.peak_rss_bytes is not None or "runs" in self.statements
        )


def parse(text: str) -> Snapshot:
    """The cost metrics in a Prometheus text exposition; lines it does not know are skipped."""
    values: dict[str, float] = {}
    statements: dict[str, float] = {}
    for line in text.splitlines():
        match = _SAMPLE.match(line.strip())
        if match is None or match["name"] not in WANTED:
            continue
        try:
            value = float(match["value"])
        except ValueError:
            continue
        if match["name"] == STATEMENTS:
            labels = dict(_LABEL.findall(match["labels"] or ""))
            database = labels.get("database")
            if database:
                statements[database] = statements.get(database, 0.0) + value
        else:
            values[match["name"]] = value
    return Snapshot(
        cpu_s=values.get(CPU_SECONDS),
        start_time=values.get(START_TIME),
        peak_rss_bytes=values.get(PEAK_RSS),
        statements=statements,
    )


async def scrape(urls: Sequence[str]) -> list[Snapshot | None]:
    """GET /metrics on every instance at once; None for one that has no usable answer.

    A client of its own, so each request reaches the instance it names (the bench's client
    spreads requests round-robin) and no scenario connection is taken.
    """
    timeout = httpx.Timeout(SCRAPE_TIMEOUT_SECONDS)
    async with httpx.AsyncClient(timeout=timeout, trust_env=False) as http:
        return list(await asyncio.gather(*(_scrape_one(http, url) for url in urls)))


async def _scrape_one(http: httpx.AsyncClient, url: str) -> Snapshot | None:
    try:
        response = await http.get(url.rstrip("/") + "/metrics")
    except httpx.HTTPError as exc:
        log.info("bench_metrics_unavailable url=%s error=%r", url, exc)
        return None
    if response.status_code != 200:
        log.info("bench_metrics_unavailable url=%s status=%s", url, response.status_code)
        return None
    snapshot = parse(response.text)
    return snapshot if snapshot.useful else None


def server_cost(
    before: Sequence[Snapshot | None], after: Sequence[Snapshot | None], runs: int
) -> dict[str, Any] | None:
    """Per-run server cost between two scrapes of the same instances (in the same order).

    Deltas are taken per instance, then summed. None if an instance restarted in between:
    its counters started again from zero, so no delta means anything.
    """
    pairs: list[tuple[Snapshot, Snapshot]] = []
    for index, (old, new) in enumerate(zip(before, after, strict=True)):
        old, new = (old if old and old.useful else None), (new if new and new.useful else None)
        if old is None or new is None:
            if old is not None or new is not None:
                log.warning("bench_metrics_missing instance=%s before=%s", index, old is not None)
            continue
        if _restarted(old, new):
            log.warning("bench_instance_restarted_between_scrapes instance=%s", index)
            return None
        pairs.append((old, new))
    return {
        "cpu_ms_per_run": _cpu_ms_per_run(pairs, runs),
        "statements_per_run": _statements_per_run(pairs, runs),
        "peak_rss_mb": _peak_rss_mb([new for _, new in pairs]),
        "instances_scraped": len(pairs),
    }


def _restarted(old: Snapshot, new: Snapshot) -> bool:
    """Another process answers at that URL: a new start time, or a counter that went down."""
    if old.start_time is not None and new.start_time is not None:
        if abs(new.start_time - old.start_time) > 0.01:
            return True
    if old.cpu_s is not None and new.cpu_s is not None and new.cpu_s < old.cpu_s:
        return True
    return any(new.statements.get(db, 0.0) < count for db, count in old.statements.items())


def _cpu_ms_per_run(pairs: list[tuple[Snapshot, Snapshot]], runs: int) -> float | None:
    deltas = [
        new.cpu_s - old.cpu_s
        for old, new in pairs
        if old.cpu_s is not None and new.cpu_s is not None
    ]
    if not pairs or len(deltas) < len(pairs):
        return None
    return round(sum(deltas) * 1000 / runs, 1)


def _statements_per_run(
    pairs: list[tuple[Snapshot, Snapshot]], runs: int
) -> dict[str, float | None]:
    if not pairs or any("runs" not in snap.statements for pair in pairs for snap in pair):
        return {"runs": None, "checkpoints": None, "total": None}
    # No checkpoints series: the checkpointer sends nothing that Runyard counts (SQLite).
    own = sum(new.statements["runs"] - old.statements["runs"] for old, new in pairs)
    checkpoints = sum(
        new.statements.get("checkpoints", 0.0) - old.statements.get("checkpoints", 0.0)
        for old, new in pairs
    )
    return {
        "runs": round(own / runs, 1),
        "checkpoints": round(checkpoints / runs, 1),
        "total": round((own + checkpoints) / runs, 1),
    }


def _peak_rss_mb(ends: list[Snapshot]) -> float | None:
    peaks = [snap.peak_rss_bytes for snap in ends if snap.peak_rss_bytes is not None]
    if not ends or len(peaks) < len(ends):
        return None
    return round(max(peaks) / 1e6, 1)
