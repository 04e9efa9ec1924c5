"""psycopg's refusal of a NUL character is the client's invalid input; other errors are not."""

from __future__ import annotations

import psycopg
import pytest
from psycopg import errors

from runyard.checkpoints.pg_errors import unstorable_text
from runyard.domain.errors import UNSTORABLE_TEXT_MESSAGE, InvalidInputError


@pytest.mark.parametrize(
    "exc",
    [
        psycopg.DataError("PostgreSQL text fields cannot contain NUL (0x00) bytes"),
        errors.UntranslatableCharacter("unsupported Unicode escape sequence"),
        errors.CharacterNotInRepertoire("invalid byte sequence for encoding"),
    ],
    ids=["psycopg-refuses-nul", "22P05", "22021"],
)
def test_nul_refusals_become_invalid_input(exc: Exception) -> None:
    error = unstorable_text(exc)
    assert isinstance(error, InvalidInputError)
    assert error.message == UNSTORABLE_TEXT_MESSAGE
    assert error.status_code == 422


@pytest.mark.parametrize(
    "exc",
    [
        errors.NumericValueOutOfRange("integer out of range"),
        psycopg.OperationalError("connection refused"),
        ValueError("NUL (0x00)"),
    ],
    ids=["other-data-error", "not-a-data-error", "not-psycopg"],
)
def test_other_errors_are_left_alone(exc: Exception) -> None:
    assert unstorable_text(exc) is None
