"""The console's charts, from the runs of the last hour: runs started and finished per
minute, and the duration of the runs that finished each minute (p50, p95), per instance,
per fairness group and in all. Pure code: the rows come from runyard/db/console.py."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

MINUTES = 60
# Series drawn at most per kind (instances, groups): the busiest; the rest are in `all`.
MAX_SERIES = 8


@dataclass
class Series:
    """One line of the charts: per minute, runs started, runs finished, and the p50 and
    p95 of the durations (seconds) of the runs that finished (None: none finished)."""

    key: str
    started: list[int] = field(default_factory=lambda: [0] * MINUTES)
    finished: list[int] = field(default_factory=lambda: [0] * MINUTES)
    durations: list[list[float]] = field(default_factory=lambda: [[] for _ in range(MINUTES)])

    def p(self, quantile: float) -> list[float | None]:
        """The `quantile` (0..1) of each minute's durations, nearest rank."""
        return [percentile(minute, quantile) for minute in self.durations]


@dataclass(frozen=True)
class Charts:
    """The minutes (their starts, oldest first) and the series over them."""

    minutes: list[datetime]
    total: Series
    by_instance: list[Series]
    by_group: list[Series]


def percentile(values: list[float], quantile: float) -> float | None:
    """The nearest-rank percentile of `values` (None when empty)."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(quantile * len(ordered)))
    return ordered[rank - 1]


def minute_index(first: datetime, moment: datetime | None) -> int | None:
    """The index of the minute `moment` falls in, None outside the hour from `first`."""
    if moment is None:
        return None
    index = int((moment - first).total_seconds() // 60)
    return index if 0 <= index < MINUTES else None


def build_charts(rows: Iterable[Mapping[str, Any]], now: datetime) -> Charts:
    """The charts of these runs (`last_owner`, `fairness_group`, `started_at`, `ended_at`)
    over the hour ending with the minute of `now`."""
    last = now.replace(second=0, microsecond=0)
    first = last - timedelta(minutes=MINUTES - 1)
    total = Series("all")
    instances: dict[str, Series] = {}
    groups: dict[str, Series] = {}
    for row in rows:
        owner = str(row.get("last_owner") or "unknown")
        group = str(row.get("fairness_group") or "default")
        lines = (
            total,
            instances.setdefault(owner, Series(owner)),
            groups.setdefault(group, Series(group)),
        )
        started, ended = row.get("started_at"), row.get("ended_at")
        start_at, end_at = minute_index(first, started), minute_index(first, ended)
        for line in lines:
            if start_at is not None:
                line.started[start_at] += 1
            if end_at is not None:
                line.finished[end_at] += 1
                if started is not None and ended is not None:
                    line.durations[end_at].append(max(0.0, (ended - started).total_seconds()))
    minutes = [first + timedelta(minutes=i) for i in range(MINUTES)]
    return Charts(minutes, total, _busiest(instances), _busiest(groups))


def _busiest(series: dict[str, Series]) -> list[Series]:
    volume = Counter({key: sum(s.started) + sum(s.finished) for key, s in series.items()})
    return [series[key] for key, _ in volume.most_common(MAX_SERIES)]
