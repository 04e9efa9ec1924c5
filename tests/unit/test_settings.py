"""Settings: read from the environment and `.env`, validated with messages naming the setting."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from runyard.domain.group_caps import GroupCap, GroupCaps, caps_from
from runyard.settings import OFFICIAL_NAMES, Settings, setting_names

# Every alias Settings reads, so a developer's shell cannot leak into these tests.
SETTING_NAMES = setting_names()


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Remove every Runyard setting from the environment for the test."""
    for name in SETTING_NAMES:
        monkeypatch.delenv(name, raising=False)
    yield


def load(**values: Any) -> Settings:
    """Settings from the (cleaned) environment plus these values, ignoring any `.env` file."""
    return Settings(_env_file=None, **values)  # type: ignore[call-arg]


def test_defaults_are_the_embedded_dev_mode() -> None:
    settings = load()
    assert settings.database_url is None
    assert settings.redis_url is None
    assert settings.is_embedded
    assert settings.redis_prefix == "runyard:"
    assert settings.worker_count == 1
    assert settings.heartbeat_interval_seconds * 2 <= settings.lease_duration_seconds


def test_embedded_database_lives_in_the_data_dir(tmp_path: Path) -> None:
    settings = load(RUNYARD_DATA_DIR=str(tmp_path))
    url = settings.resolved_database_url()
    assert url.startswith("sqlite+aiosqlite:///")
    assert url.endswith(str(tmp_path.resolve() / "runyard.sqlite"))


def test_every_setting_is_documented_in_env_example() -> None:
    example = (Path(__file__).resolve().parents[2] / ".env.example").read_text()
    documented = set(re.findall(r"^#? ?([A-Z][A-Z0-9_]*)=", example, flags=re.MULTILINE))
    assert set(SETTING_NAMES) <= documented, set(SETTING_NAMES) - documented


def test_env_example_shows_the_real_defaults(tmp_path: Path) -> None:
    example = (Path(__file__).resolve().parents[2] / ".env.example").read_text()
    pairs = re.findall(r"^# ?([A-Z][A-Z0-9_]*)=(.*)$", example, flags=re.MULTILINE)
    env_file = tmp_path / ".env"
    # Empty values mean "unset" in the example; an empty path would not be a default.
    env_file.write_text("".join(f"{name}={value}\n" for name, value in pairs if value))
    from_example = Settings(_env_file=env_file)  # type: ignore[call-arg]
    assert from_example.model_dump() == load().model_dump()


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("postgres://u:p@db:5432/runyard", "postgresql+asyncpg://u:p@db:5432/runyard"),
        ("postgresql://u@db/runyard", "postgresql+asyncpg://u@db/runyard"),
        ("postgresql+asyncpg://u@db/runyard", "postgresql+asyncpg://u@db/runyard"),
        ("sqlite+aiosqlite:///tmp/x.sqlite", "sqlite+aiosqlite:///tmp/x.sqlite"),
    ],
)
def test_database_url_is_normalized_for_the_async_drivers(
    monkeypatch: pytest.MonkeyPatch, given: str, expected: str
) -> None:
    monkeypatch.setenv("DATABASE_URL", given)
    settings = load()
    assert settings.database_url == expected
    assert settings.resolved_database_url() == expected
    assert settings.is_embedded == expected.startswith("sqlite")


def test_empty_database_url_means_embedded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DATABASE_URL", "")
    monkeypatch.setenv("REDIS_URL", "")
    settings = load()
    assert settings.database_url is None
    assert settings.redis_url is None
    assert settings.is_embedded


@pytest.mark.parametrize("url", ["mysql://root@db/runyard", "localhost:5432", "sqlite:///x.db"])
def test_bad_database_url_names_the_setting(monkeypatch: pytest.MonkeyPatch, url: str) -> None:
    monkeypatch.setenv("DATABASE_URL", url)
    with pytest.raises(ValidationError) as caught:
        load()
    message = str(caught.value)
    assert "DATABASE_URL" in message
    assert "postgresql://" in message  # tells the user what a good value looks like


def test_bad_redis_url_names_the_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REDIS_URL", "localhost:6379")
    with pytest.raises(ValidationError, match="REDIS_URL"):
        load()


def test_redis_url_is_accepted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REDIS_URL", "redis://127.0.0.1:6379/0")
    assert load().redis_url == "redis://127.0.0.1:6379/0"


@pytest.mark.parametrize(("heartbeat", "lease"), [(20, 30), (30, 30), (40, 30), (5.1, 10)])
def test_heartbeat_not_well_below_the_lease_is_refused(
    monkeypatch: pytest.MonkeyPatch, heartbeat: float, lease: float
) -> None:
    monkeypatch.setenv("HEARTBEAT_INTERVAL_SECONDS", str(heartbeat))
    monkeypatch.setenv("LEASE_DURATION_SECONDS", str(lease))
    with pytest.raises(ValidationError) as caught:
        load()
    message = str(caught.value)
    assert "HEARTBEAT_INTERVAL_SECONDS" in message
    assert "LEASE_DURATION_SECONDS" in message


@pytest.mark.parametrize(("heartbeat", "lease"), [(5, 30), (15, 30), (1, 3)])
def test_heartbeat_at_most_half_the_lease_is_accepted(
    monkeypatch: pytest.MonkeyPatch, heartbeat: float, lease: float
) -> None:
    monkeypatch.setenv("HEARTBEAT_INTERVAL_SECONDS", str(heartbeat))
    monkeypatch.setenv("LEASE_DURATION_SECONDS", str(lease))
    settings = load()
    assert settings.heartbeat_interval_seconds == heartbeat
    assert settings.lease_duration_seconds == lease


@pytest.mark.parametrize(
    ("name", "value"),
    [("WORKER_COUNT", "-1"), ("N_JOBS_PER_WORKER", "0"), ("LEASE_DURATION_SECONDS", "0")],
)
def test_out_of_range_numbers_name_the_setting(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str
) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(ValidationError, match=name):
        load()


def test_worker_knobs_use_the_conventional_names(monkeypatch: pytest.MonkeyPatch) -> None:
    values = {
        "WORKER_COUNT": "3",
        "N_JOBS_PER_WORKER": "7",
        "BG_JOB_TIMEOUT_SECS": "60",
        "BG_JOB_MAX_RETRIES": "5",
        "LEASE_DURATION_SECONDS": "12",
        "HEARTBEAT_INTERVAL_SECONDS": "2",
        "REAPER_INTERVAL_SECONDS": "4",
        "STUCK_PENDING_THRESHOLD_SECONDS": "9",
        "POSTGRES_POLL_INTERVAL_SECONDS": "0.5",
        "WORKER_DRAIN_TIMEOUT": "11",
    }
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    settings = load()
    assert (settings.worker_count, settings.n_jobs_per_worker) == (3, 7)
    assert (settings.bg_job_timeout_secs, settings.bg_job_max_retries) == (60, 5)
    assert (settings.lease_duration_seconds, settings.heartbeat_interval_seconds) == (12, 2)
    assert settings.reaper_interval_seconds == 4
    assert settings.stuck_pending_threshold_seconds == 9
    assert settings.postgres_poll_interval_seconds == 0.5
    assert settings.worker_drain_timeout == 11


def test_env_file_is_honoured_and_the_environment_wins(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    env_file = tmp_path / ".env"
    env_file.write_text("WORKER_COUNT=4\nRUNYARD_REDIS_PREFIX=team-a:\n")
    monkeypatch.setenv("WORKER_COUNT", "6")
    settings = Settings(_env_file=env_file)  # type: ignore[call-arg]
    assert settings.redis_prefix == "team-a:"
    assert settings.worker_count == 6


def test_env_file_values_are_validated_too(tmp_path: Path) -> None:
    env_file = tmp_path / ".env"
    env_file.write_text("HEARTBEAT_INTERVAL_SECONDS=60\n")
    with pytest.raises(ValidationError, match="HEARTBEAT_INTERVAL_SECONDS"):
        Settings(_env_file=env_file)  # type: ignore[call-arg]


# --- LangGraph's server's names ---------------------------------------------------------


@pytest.mark.parametrize(
    ("official", "value", "field", "expected"),
    [
        ("DATABASE_URI", "postgres://u@db/app", "database_url", "postgresql+asyncpg://u@db/app"),
        ("REDIS_URI", "redis://cache:6379/0", "redis_url", "redis://cache:6379/0"),
        ("REDIS_KEY_PREFIX", "team-b:", "redis_prefix", "team-b:"),
        ("MOUNT_PREFIX", "/my-api", "mount_prefix", "/my-api"),
        ("LANGGRAPH_POSTGRES_POOL_MAX_SIZE", "7", "db_pool_size", 7),
        ("BG_JOB_SHUTDOWN_GRACE_PERIOD_SECS", "90", "worker_drain_timeout", 90),
        ("RESUMABLE_STREAM_TTL_SECONDS", "120", "event_retention_seconds", 120),
    ],
)
def test_langgraph_servers_names_are_read(
    monkeypatch: pytest.MonkeyPatch, official: str, value: str, field: str, expected: Any
) -> None:
    """langgraph-api 0.16.7 (langgraph_api/config) reads these names; Runyard reads them too."""
    monkeypatch.setenv(official, value)
    assert getattr(load(), field) == expected


@pytest.mark.parametrize(("runyard", "official"), sorted(OFFICIAL_NAMES.items()))
def test_runyards_name_wins_when_both_are_set(
    monkeypatch: pytest.MonkeyPatch, runyard: str, official: str
) -> None:
    samples = {
        "DATABASE_URL": ("postgres://u@runyard/db", "postgres://u@official/db"),
        "REDIS_URL": ("redis://runyard:6379", "redis://official:6379"),
        "RUNYARD_REDIS_PREFIX": ("runyard-a:", "official-b:"),
        "RUNYARD_DB_POOL_SIZE": ("3", "30"),
        "WORKER_DRAIN_TIMEOUT": ("4", "40"),
        "RUNYARD_EVENT_RETENTION_SECONDS": ("5", "50"),
        "RUNYARD_MAX_BODY_BYTES": ("2048", "4096"),
    }
    mine, theirs = samples[runyard]
    monkeypatch.setenv(runyard, mine)
    alone = load()
    monkeypatch.setenv(official, theirs)
    assert load().model_dump() == alone.model_dump()
    monkeypatch.delenv(runyard)
    assert load().model_dump() != alone.model_dump()


def test_a_bad_mount_prefix_names_the_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MOUNT_PREFIX", "api/")
    with pytest.raises(ValidationError, match="MOUNT_PREFIX"):
        load()


def test_group_caps_default_to_none_and_take_overrides(monkeypatch: pytest.MonkeyPatch) -> None:
    assert not caps_of(load()).any
    monkeypatch.setenv("RUNYARD_GROUP_MAX_RUNNING", "10")
    monkeypatch.setenv(
        "RUNYARD_GROUP_LIMITS",
        '{"a": {"max_running": 3, "max_starts_per_minute": 60}, "b": {"max_running": 0},'
        ' "c": {"max_starts_per_minute": 5}}',
    )
    caps = caps_of(load())
    assert caps.of("a") == GroupCap(max_running=3, max_starts_per_minute=60)
    assert not caps.of("b").capped  # 0 lifts the default
    assert caps.of("c") == GroupCap(max_running=10, max_starts_per_minute=5)  # default kept
    assert caps.of("anyone else") == GroupCap(max_running=10)


@pytest.mark.parametrize(
    ("raw", "named"),
    [
        ("{not json", "not valid JSON"),
        ('["a"]', "must be a JSON object"),
        ('{"a": 3}', "RUNYARD_GROUP_LIMITS['a'] must be an object"),
        ('{"a": {"max_runing": 3}}', "unknown keys ['max_runing']"),
        ('{"a": {"max_running": -1}}', "RUNYARD_GROUP_LIMITS['a'].max_running must be an integer"),
        ('{"a": {"max_running": "3"}}', "max_running must be an integer >= 0"),
    ],
)
def test_bad_group_limits_stop_start_up_naming_the_group_and_key(
    monkeypatch: pytest.MonkeyPatch, raw: str, named: str
) -> None:
    monkeypatch.setenv("RUNYARD_GROUP_LIMITS", raw)
    with pytest.raises(ValidationError) as caught:
        load()
    assert named in str(caught.value)


def test_a_negative_default_cap_names_the_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RUNYARD_GROUP_MAX_RUNNING", "-1")
    with pytest.raises(ValidationError, match="RUNYARD_GROUP_MAX_RUNNING"):
        load()


def caps_of(settings: Settings) -> GroupCaps:
    """The caps the runtime builds from these settings."""
    return caps_from(
        settings.group_max_running,
        settings.group_max_starts_per_minute,
        settings.group_limit_overrides,
    )
