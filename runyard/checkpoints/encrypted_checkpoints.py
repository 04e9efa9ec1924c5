"""What the checkpoint savers share when checkpoints are encrypted at rest."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from runyard.domain.errors import DecryptionError


@contextmanager
def naming_checkpoint(thread_id: str, checkpoint_ns: str, checkpoint_id: str) -> Iterator[None]:
    """A decryption error raised inside names the checkpoint it was reading."""
    try:
        yield
    except DecryptionError as exc:
        where = f"checkpoint {checkpoint_id} of thread {thread_id}"
        if checkpoint_ns:
            where += f" (namespace {checkpoint_ns!r})"
        raise DecryptionError(f"{where}: {exc.message}") from None
