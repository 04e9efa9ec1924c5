"""Cron schedule arithmetic with an injected clock: next occurrence, no backfill, end time."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from runyard.domain.cron_schedule import (
    first_run_date,
    latest_occurrence,
    next_occurrence,
    parse_timezone,
    plan_firing,
    validate_schedule,
)
from runyard.domain.errors import InvalidInputError

T0 = datetime(2026, 3, 2, 12, 0, 0, tzinfo=UTC)  # a Monday
EVERY_5_MIN = "*/5 * * * *"


def at(**delta: float) -> datetime:
    """T0 moved by a timedelta."""
    return T0 + timedelta(**delta)


def test_next_occurrence_is_strictly_after() -> None:
    assert next_occurrence(EVERY_5_MIN, UTC, T0) == at(minutes=5)
    assert next_occurrence(EVERY_5_MIN, UTC, at(minutes=3, seconds=1)) == at(minutes=5)


def test_seconds_field_gives_per_second_schedules() -> None:
    start = at(seconds=5, microseconds=300_000)
    assert next_occurrence("* * * * * *", UTC, start) == at(seconds=6)
    assert next_occurrence("* * * * * */10", UTC, start) == at(seconds=10)


def test_latest_occurrence_includes_the_instant_itself() -> None:
    assert latest_occurrence(EVERY_5_MIN, UTC, at(minutes=5)) == at(minutes=5)
    assert latest_occurrence(EVERY_5_MIN, UTC, at(minutes=9, seconds=59)) == at(minutes=5)
    assert latest_occurrence("* * * * * *", UTC, at(seconds=7, microseconds=1)) == at(seconds=7)


def test_timezone_shifts_the_schedule_and_results_are_utc() -> None:
    paris = parse_timezone("Europe/Paris")  # UTC+1 in March before the DST change
    upcoming = next_occurrence("0 9 * * *", paris, T0)
    assert upcoming == datetime(2026, 3, 3, 8, 0, tzinfo=UTC)
    assert upcoming.tzinfo is UTC


def test_timezone_follows_daylight_saving_time() -> None:
    new_york = parse_timezone("America/New_York")
    before = next_occurrence("0 9 * * *", new_york, datetime(2026, 3, 6, tzinfo=UTC))
    after = next_occurrence("0 9 * * *", new_york, datetime(2026, 3, 10, tzinfo=UTC))
    assert before.hour == 14  # EST, UTC-5
    assert after.hour == 13  # EDT, UTC-4 after 2026-03-08


def test_not_due_before_next_run_date() -> None:
    assert plan_firing(EVERY_5_MIN, UTC, at(minutes=5), None, at(minutes=4)) is None
    assert plan_firing(EVERY_5_MIN, UTC, None, None, at(minutes=4)) is None


def test_due_fires_the_occurrence_and_moves_past_now() -> None:
    firing = plan_firing(EVERY_5_MIN, UTC, at(minutes=5), None, at(minutes=5, seconds=0.2))
    assert firing is not None
    assert firing.scheduled_for == at(minutes=5)
    assert firing.next_run_date == at(minutes=10)


def test_after_downtime_fires_once_for_the_latest_missed_occurrence() -> None:
    # Down from 12:05 to 14:07: 25 occurrences missed, one firing, then back on schedule.
    firing = plan_firing(EVERY_5_MIN, UTC, at(minutes=5), None, at(hours=2, minutes=7))
    assert firing is not None
    assert firing.scheduled_for == at(hours=2, minutes=5)
    assert firing.next_run_date == at(hours=2, minutes=10)


def test_end_time_caps_the_occurrence_and_stops_the_schedule() -> None:
    end = at(minutes=12)
    firing = plan_firing(EVERY_5_MIN, UTC, at(minutes=5), end, at(minutes=30))
    assert firing is not None
    assert firing.scheduled_for == at(minutes=10)  # the last one before the end time
    assert firing.next_run_date is None


def test_end_time_before_next_run_date_fires_nothing() -> None:
    firing = plan_firing(EVERY_5_MIN, UTC, at(minutes=5), at(minutes=4), at(minutes=6))
    assert firing is not None
    assert firing.scheduled_for is None
    assert firing.next_run_date is None


def test_first_run_date_respects_end_time() -> None:
    assert first_run_date(EVERY_5_MIN, UTC, None, T0) == at(minutes=5)
    assert first_run_date(EVERY_5_MIN, UTC, at(minutes=1), T0) is None
    assert first_run_date("0 0 1 1 * 0 2001", UTC, None, T0) is None  # its years are over


@pytest.mark.parametrize(
    ("schedule", "problem"),
    [
        ("every minute", "Exactly 5, 6 or 7 columns"),
        ("61 * * * *", "out of range"),
        ("*/0 * * * *", "step '0'"),
        ("0 0 31 2 *", "failed to find next date"),
    ],
)
def test_bad_schedules_name_the_problem(schedule: str, problem: str) -> None:
    with pytest.raises(InvalidInputError) as caught:
        validate_schedule(schedule)
    assert schedule in caught.value.message
    assert problem in caught.value.message
    assert "*/5 * * * *" in caught.value.message  # and how to write one


def test_good_schedules_pass() -> None:
    for schedule in ("*/5 * * * *", "0 9 * * MON-FRI", "@hourly", "* * * * * */2"):
        validate_schedule(schedule)


@pytest.mark.parametrize("name", ["Mars/Olympus_Mons", "", "../etc/passwd", "UTC+3"])
def test_bad_timezones_name_the_problem(name: str) -> None:
    with pytest.raises(InvalidInputError) as caught:
        parse_timezone(name)
    assert repr(name) in caught.value.message
    assert "IANA" in caught.value.message


def test_missing_timezone_means_utc() -> None:
    assert parse_timezone(None) is UTC
