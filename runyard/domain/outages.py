"""The errors that say a service the instance depends on is out of reach, as opposed to a
bug or the caller's mistake: each transport backend declares its own when it is opened
(runyard/wiring/transport.py), and every surface that answers "retry shortly" asks here."""

from __future__ import annotations

# Socket errors from any client; a backend adds its client library's own.
_OUTAGE_ERRORS: set[type[BaseException]] = {ConnectionError}


def declare_outage_errors(*kinds: type[BaseException]) -> None:
    """Count `kinds` as outages from now on (idempotent; several runtimes in one process
    only add to the set)."""
    _OUTAGE_ERRORS.update(kinds)


def is_outage_error(exc: BaseException) -> bool:
    """Whether `exc` is one of the declared outage errors."""
    return isinstance(exc, tuple(_OUTAGE_ERRORS))
