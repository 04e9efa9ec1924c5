"""What an attempt's final write did: the lifecycle's answer to `finish` and `release`,
a small typed value instead of `True`, `False` or a stop's name."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum, auto

from runyard.domain.status import CancelAction


class Written(Enum):
    """How an attempt's final write went."""

    # Recorded: by this call, or by an earlier try whose reply was lost.
    DONE = auto()
    # Another attempt holds the run (or it ended, or was deleted): nothing was written.
    REFUSED = auto()
    # A stop stronger than the one this write carries out was recorded first: nothing was
    # written, and the attempt ends the run as that stop asks.
    OVERRULED = auto()


@dataclass(frozen=True, slots=True)
class FinalWrite:
    """The outcome of an attempt's final write, with the overruling stop when there is one."""

    written: Written
    stop: CancelAction | None = None

    @property
    def done(self) -> bool:
        """The write is recorded."""
        return self.written is Written.DONE


DONE = FinalWrite(Written.DONE)
REFUSED = FinalWrite(Written.REFUSED)


def overruled(stop: CancelAction) -> FinalWrite:
    """Nothing written: `stop`, recorded first, decides how the run ends."""
    return FinalWrite(Written.OVERRULED, stop)
