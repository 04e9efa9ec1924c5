"""How long each phase of an instance's shutdown may take (runyard/wiring/shutdown.py): the
settings that bound them, read with the others (`Settings` inherits them). The drain's
bound is WORKER_DRAIN_TIMEOUT, beside the worker settings."""

from __future__ import annotations

from pydantic import BaseModel, Field


class ShutdownBounds(BaseModel):
    """The shutdown phases' bounds, in seconds."""

    # Stop intake: the background loops stop, the pool stops claiming.
    shutdown_intake_seconds: float = Field(
        default=10.0, gt=0, alias="RUNYARD_SHUTDOWN_INTAKE_SECONDS"
    )
    # Hand back: the runs still executing after the drain go back to pending; their attempts
    # get this long to end before lease renewal stops.
    handback_timeout_seconds: float = Field(
        default=10.0, gt=0, alias="RUNYARD_HANDBACK_TIMEOUT_SECONDS"
    )
    # Closing the transport (Redis or in-process) and the store (databases, checkpointer).
    shutdown_transport_seconds: float = Field(
        default=10.0, gt=0, alias="RUNYARD_SHUTDOWN_TRANSPORT_SECONDS"
    )
    shutdown_store_seconds: float = Field(
        default=10.0, gt=0, alias="RUNYARD_SHUTDOWN_STORE_SECONDS"
    )
