"""The operator console's settings (docs/console.md), a part of `Settings` kept apart."""

from __future__ import annotations

from pydantic import BaseModel, Field, field_validator

# The permission an auth handler gives a user to make them an operator of the console
# (with RUNYARD_CONSOLE_OPERATORS=true).
OPERATOR_PERMISSION = "runyard:operator"


class ConsoleSettings(BaseModel):
    """Who may open the console under `runyard serve` (under `runyard dev` it is open to
    requests from this machine); with neither set, `serve` has no console."""

    # `Authorization: Bearer <this>` opens the console and its API.
    console_token: str | None = Field(
        default=None, min_length=16, alias="RUNYARD_CONSOLE_TOKEN", repr=False
    )
    # Users the project's authenticate handler accepts with the permission
    # `runyard:operator` open the console too.
    console_operators: bool = Field(default=False, alias="RUNYARD_CONSOLE_OPERATORS")

    @field_validator("console_token", mode="before")
    @classmethod
    def _empty_token_is_unset(cls, value: object) -> object:
        return None if value == "" else value

    @property
    def console_configured(self) -> bool:
        """True when `serve` has a way to let operators in."""
        return self.console_token is not None or self.console_operators
