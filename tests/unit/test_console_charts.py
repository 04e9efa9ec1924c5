"""The console's charts: runs started and finished per minute and the durations' p50/p95,
per instance, per group and in all, over the last hour."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from runyard.domain.console_charts import MAX_SERIES, MINUTES, build_charts, percentile

NOW = datetime(2026, 12, 7, 12, 30, 40, tzinfo=UTC)


def row(owner: str, group: str, started_ago: float, ended_ago: float | None) -> dict[str, object]:
    ended = None if ended_ago is None else NOW - timedelta(seconds=ended_ago)
    return {
        "last_owner": owner,
        "fairness_group": group,
        "started_at": NOW - timedelta(seconds=started_ago),
        "ended_at": ended,
    }


def test_percentile_is_nearest_rank() -> None:
    assert percentile([], 0.5) is None
    assert percentile([3.0], 0.95) == 3.0
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 0.5) == 50.0
    assert percentile(values, 0.95) == 95.0


def test_runs_are_counted_in_their_minutes_per_instance_and_group() -> None:
    rows = [
        row("a", "g1", 10, 5),  # started and finished this minute: 5 s
        row("a", "g1", 12, 2),  # 10 s
        row("b", "g2", 70, 65),  # the minute before: 5 s
        row("b", "g2", 20, None),  # still running
        row("b", "g2", 7200, 60 * 90),  # outside the hour: not drawn
    ]
    charts = build_charts(rows, NOW)
    assert len(charts.minutes) == MINUTES
    assert charts.minutes[-1] == NOW.replace(second=0, microsecond=0)
    assert charts.total.started[-1] == 3 and charts.total.started[-2] == 1
    assert charts.total.finished[-1] == 2 and charts.total.finished[-2] == 1
    assert sum(charts.total.started) == 4 and sum(charts.total.finished) == 3
    assert charts.total.p(0.5)[-1] == 5.0 and charts.total.p(0.95)[-1] == 10.0
    assert charts.total.p(0.5)[0] is None
    by_instance = {s.key: s for s in charts.by_instance}
    assert sum(by_instance["a"].finished) == 2 and sum(by_instance["b"].started) == 2
    by_group = {s.key: s for s in charts.by_group}
    assert by_group["g2"].p(0.5)[-2] == 5.0


def test_only_the_busiest_series_are_kept() -> None:
    rows = [row(f"i{n}", f"g{n}", 5, 1) for n in range(MAX_SERIES + 3) for _ in range(n + 1)]
    charts = build_charts(rows, NOW)
    assert len(charts.by_instance) == MAX_SERIES
    assert charts.by_instance[0].key == f"i{MAX_SERIES + 2}"
    assert sum(charts.total.finished) == len(rows)
