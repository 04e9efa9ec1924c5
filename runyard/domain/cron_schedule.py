"""Cron schedule arithmetic (pure): validation, occurrences, and which occurrence is due.

croniter is imported by the functions that use it: an instance without crons never loads it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from runyard.domain.errors import InvalidInputError

SCHEDULE_HELP = (
    "use five fields 'minute hour day-of-month month day-of-week' (e.g. '*/5 * * * *' for "
    "every 5 minutes), optionally a sixth for seconds (e.g. '* * * * * */10')"
)


def parse_timezone(name: str | None) -> tzinfo:
    """The IANA timezone called `name` (UTC when None), or InvalidInputError naming it."""
    if name is None:
        return UTC
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, KeyError):
        raise InvalidInputError(
            f"invalid timezone {name!r}: use an IANA timezone name such as "
            "'America/New_York', 'Europe/Paris' or 'UTC'"
        ) from None


def validate_schedule(schedule: str) -> None:
    """Raise InvalidInputError naming the problem when `schedule` is not a cron expression."""
    from croniter import croniter

    try:
        croniter(schedule, datetime(2000, 1, 1, tzinfo=UTC)).get_next(datetime)
    except (ValueError, KeyError, TypeError) as exc:  # croniter's errors are ValueErrors
        raise InvalidInputError(
            f"invalid cron schedule {schedule!r}: {exc}; {SCHEDULE_HELP}"
        ) from None


# How many upcoming firings the minimum interval is checked over.
INTERVAL_SAMPLES = 200


def require_min_interval(schedule: str, min_seconds: int) -> None:
    """Raise InvalidInputError when two of the schedule's next firings are closer than
    `min_seconds` (checked over its next INTERVAL_SAMPLES firings)."""
    from croniter import croniter

    times = croniter(schedule, datetime(2000, 1, 1, tzinfo=UTC))
    previous: datetime = times.get_next(datetime)
    for _ in range(INTERVAL_SAMPLES):
        following: datetime = times.get_next(datetime)
        gap = (following - previous).total_seconds()
        if gap < min_seconds:
            raise InvalidInputError(
                f"cron schedule {schedule!r} fires {gap:g} s apart, more often than the "
                f"minimum interval of {min_seconds} s (RUNYARD_CRON_MIN_INTERVAL_SECONDS); "
                "choose a sparser schedule, e.g. '* * * * *' for every minute"
            )
        previous = following


def next_occurrence(schedule: str, zone: tzinfo, after: datetime) -> datetime:
    """The first occurrence strictly after `after`, in UTC."""
    from croniter import croniter

    found: datetime = croniter(schedule, after.astimezone(zone)).get_next(datetime)
    return found.astimezone(UTC)


def latest_occurrence(schedule: str, zone: tzinfo, at_or_before: datetime) -> datetime:
    """The last occurrence at or before `at_or_before`, in UTC."""
    from croniter import croniter

    local = at_or_before.astimezone(zone)
    previous: datetime = croniter(schedule, local).get_prev(datetime)
    # get_prev is strictly before its start; the start itself may be an occurrence.
    following: datetime = croniter(schedule, previous).get_next(datetime)
    found = following if following <= local else previous
    return found.astimezone(UTC)


def first_run_date(
    schedule: str, zone: tzinfo, end_time: datetime | None, now: datetime
) -> datetime | None:
    """When a new (or rescheduled) cron fires first; None when that is past its end time."""
    from croniter import CroniterBadDateError

    try:
        upcoming = next_occurrence(schedule, zone, now)
    except CroniterBadDateError:  # e.g. a seven-field schedule whose years are over
        return None
    if end_time is not None and upcoming > end_time:
        return None
    return upcoming


@dataclass(frozen=True)
class Firing:
    """What to do with a due cron: the occurrence to fire (if any) and the next run date."""

    scheduled_for: datetime | None
    next_run_date: datetime | None


def plan_firing(
    schedule: str,
    zone: tzinfo,
    next_run_date: datetime | None,
    end_time: datetime | None,
    now: datetime,
) -> Firing | None:
    """The firing of a cron at `now`, or None when it is not due.

    Of several occurrences missed (downtime, a slow tick) only the most recent one fires:
    no backfill storm. The next run date is always the first occurrence after `now`.
    """
    if next_run_date is None or next_run_date > now:
        return None
    horizon = min(now, end_time) if end_time is not None else now
    scheduled_for: datetime | None = None
    if horizon >= next_run_date:
        latest = latest_occurrence(schedule, zone, horizon)
        if latest >= next_run_date:
            scheduled_for = latest
    return Firing(scheduled_for, first_run_date(schedule, zone, end_time, now))
