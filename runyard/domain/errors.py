"""The one family of domain errors; only `runyard.api` turns them into HTTP responses."""

from __future__ import annotations

from typing import Any


class RunyardError(Exception):
    """Base of every error Runyard raises on purpose, with a message a person can act on."""

    status_code = 400

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def body(self) -> dict[str, Any]:
        """The JSON body of the answer `runyard.api` makes of it."""
        return {"detail": self.message}


class NotFoundError(RunyardError):
    """The named resource does not exist (or is not visible to the caller)."""

    status_code = 404


class ConflictError(RunyardError):
    """The request conflicts with the current state (busy thread, existing id)."""

    status_code = 409


class RunEndedError(ConflictError):
    """A stop (a cancel) reached a run that had already ended: it can no longer be carried
    out. Carries the status the run really has."""

    def __init__(self, message: str, run_status: str) -> None:
        super().__init__(message)
        self.run_status = run_status

    def body(self) -> dict[str, Any]:
        """The answer's body: the message and the run's status."""
        return {**super().body(), "status": self.run_status}


class InvalidInputError(RunyardError):
    """The request is well-formed JSON but its values cannot be used."""

    status_code = 422


class ConfigError(RunyardError):
    """The server configuration (settings, langgraph.json, graph files) is unusable."""

    status_code = 500


class StaleAttemptError(RunyardError):
    """A worker's write was refused because a newer attempt holds the run."""

    status_code = 409


class DecryptionError(RunyardError):
    """Stored data cannot be decrypted with the configured keys: a server-side fault (a key
    missing from the configuration, or data altered at rest), never the caller's."""

    status_code = 500


class UnauthorizedError(RunyardError):
    """The request carries no credentials the auth handler accepts."""

    status_code = 401


class ForbiddenError(RunyardError):
    """The auth handlers refused this action to this user."""

    status_code = 403


# PostgreSQL refuses NUL characters in text and JSONB (22P05 untranslatable character,
# 22021 character not in repertoire): that is the client's data, not a server fault.
UNSTORABLE_TEXT_SQLSTATES = frozenset({"22P05", "22021"})
UNSTORABLE_TEXT_MESSAGE = (
    "the request contains a NUL character (\\u0000), which cannot be stored or searched; "
    "remove it from strings and keys"
)
