"""psycopg's refusals of the client's data, recognized without importing psycopg.

LangGraph's PostgreSQL store and checkpointer speak psycopg, whose errors SQLAlchemy's
handlers in `runyard.api` never see. Each place that calls them converts the one refusal that
is the client's fault (a NUL character) into the domain error the API answers with 422;
importing psycopg for the `isinstance` test would cost every instance its memory even
where psycopg is never used.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from runyard.domain.errors import (
    UNSTORABLE_TEXT_MESSAGE,
    UNSTORABLE_TEXT_SQLSTATES,
    InvalidInputError,
)


def unstorable_text(exc: BaseException) -> InvalidInputError | None:
    """InvalidInputError when `exc` is psycopg refusing a NUL character; None otherwise."""
    if not _is_psycopg_data_error(exc):
        return None
    # psycopg itself refuses NUL in text parameters, before PostgreSQL sees them (no sqlstate);
    # PostgreSQL refuses a \u0000 escape in JSONB.
    if getattr(exc, "sqlstate", None) in UNSTORABLE_TEXT_SQLSTATES or "NUL (0x00)" in str(exc):
        return InvalidInputError(UNSTORABLE_TEXT_MESSAGE)
    return None


def _is_psycopg_data_error(exc: BaseException) -> bool:
    # psycopg.DataError or a subclass of it (psycopg.errors.UntranslatableCharacter…).
    return any(
        cls.__name__ == "DataError" and cls.__module__.partition(".")[0] == "psycopg"
        for cls in type(exc).__mro__
    )


@contextmanager
def client_data_errors() -> Iterator[None]:
    """Raise psycopg's refusal of a NUL character as the InvalidInputError it stands for."""
    try:
        yield
    except Exception as exc:
        if (error := unstorable_text(exc)) is not None:
            raise error from exc
        raise
