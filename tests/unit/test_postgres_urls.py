"""PostgreSQL URLs read as libpq reads them (runyard/domain/postgres_url.py)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from runyard.db.conninfo import sqlalchemy_url
from runyard.domain.postgres_url import parse_postgres_url
from runyard.settings import Settings


@pytest.mark.parametrize(
    ("url", "where"),
    [
        ("postgres://u:pw@db.example:6543/app", "db.example:6543"),
        ("postgresql://u@db/app", "db:5432"),
        ("postgresql://u@/app?host=/run/pg", "the socket /run/pg/.s.PGSQL.5432"),
        ("postgresql://u@%2Frun%2Fpg:5433/app", "the socket /run/pg/.s.PGSQL.5433"),
        ("postgresql://u@a:5432,b:5433/app", "a:5432, b:5433"),
        ("postgresql://u@[::1]:5434/app", "::1:5434"),
    ],
)
def test_where_a_url_connects_is_named_without_its_password(url: str, where: str) -> None:
    parsed = parse_postgres_url(url)
    assert parsed.where == where
    assert "pw" not in parsed.where


def test_parameters_are_decoded_as_libpq_decodes_them() -> None:
    parsed = parse_postgres_url(
        "postgres://u@h/db?options=-c%20search_path%3Dx+y&connect_timeout=1&sslmode=disable"
    )
    # '+' is a plus sign to libpq, not a space.
    assert dict(parsed.parameters)["options"] == "-c search_path=x+y"
    assert parsed.connect_timeout == 2.0  # libpq's minimum
    assert "connect_timeout" not in parsed.asyncpg_dsn
    assert "options=-c%20search_path%3Dx%2By" in parsed.asyncpg_dsn
    assert parsed.libpq.startswith("postgresql://u@h/db?")


def test_the_engine_url_names_the_database_and_user() -> None:
    url = sqlalchemy_url(
        parse_postgres_url("postgresql+asyncpg://u:p%40ss@h:6000/db?sslmode=prefer")
    )
    assert (url.drivername, url.username, url.password, url.host, url.port, url.database) == (
        "postgresql+asyncpg",
        "u",
        "p@ss",
        "h",
        6000,
        "db",
    )


@pytest.mark.parametrize(
    ("query", "named"),
    [
        ("keepalives=1", "'keepalives' is not supported"),
        ("sslmode=verify", "sslmode='verify' is not one of"),
        ("target_session_attrs=master", "target_session_attrs='master' is not one of"),
        ("connect_timeout=5s", "connect_timeout must be a whole number"),
        ("prepared_statement_cache_size=0", "'prepared_statement_cache_size' is not supported"),
    ],
)
def test_a_parameter_runyard_cannot_honour_is_refused_at_start(
    monkeypatch: pytest.MonkeyPatch, query: str, named: str
) -> None:
    monkeypatch.setenv("DATABASE_URI", f"postgres://u@h/db?{query}")
    monkeypatch.delenv("DATABASE_URL", raising=False)
    with pytest.raises(ValidationError) as refused:
        Settings()
    assert named in str(refused.value)
    assert "DATABASE_URL" in str(refused.value)
