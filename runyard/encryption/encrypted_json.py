"""The JSON of threads, runs, assistants and crons through the custom encryption's JSON handlers
(`encryption.path`), where the services write and read it; nothing without it."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Protocol

from runyard.db.threads import ThreadState
from runyard.domain.assistant import StoredAssistant
from runyard.domain.cron import CronRecord
from runyard.domain.encrypted_fields import THREAD_FIELDS
from runyard.domain.run import RunRecord
from runyard.domain.thread import ThreadRecord

if TYPE_CHECKING:
    from runyard.encryption.custom import CustomEncryption


class EncryptionHolder(Protocol):
    """Anything that holds the custom encryption (None without `encryption.path`)."""

    @property
    def encryption(self) -> CustomEncryption | None:
        """The project's encryption handlers."""


async def sealed(holder: EncryptionHolder, model: str, field: str, data: Any) -> Any:
    """`data` as it is stored: its values encrypted, the caller's context beside them."""
    if holder.encryption is None:
        return data
    return await holder.encryption.encrypt_json(model, field, data)


async def sealed_fields(
    holder: EncryptionHolder, model: str, row: Any, fields: Iterable[str]
) -> Any:
    """A copy of `row` with these JSON fields as they are stored (the row itself without
    custom encryption)."""
    if holder.encryption is None or row is None:
        return row
    return await holder.encryption.encrypt_fields(model, dict(row), fields)


async def opened(holder: EncryptionHolder, model: str, row: Any, fields: Iterable[str]) -> Any:
    """A copy of the stored `row` with these JSON fields decrypted (the row itself without
    custom encryption)."""
    if holder.encryption is None or row is None:
        return row
    return await holder.encryption.decrypt_fields(model, dict(row), fields)


async def opened_assistant(holder: EncryptionHolder, assistant: StoredAssistant) -> StoredAssistant:
    """The stored assistant (or version) with its metadata, config and context decrypted (the
    record itself without custom encryption)."""
    if holder.encryption is None:
        return assistant
    return await holder.encryption.open_assistant(assistant)


async def sealed_state(holder: EncryptionHolder, state: ThreadState) -> ThreadState:
    """What a thread row caches of its state as it is stored: its values, interrupts and
    error through the JSON handlers (those that are objects; a graph's state may be a
    list, left as it is)."""
    if holder.encryption is None:
        return state
    fields = [f for f in ("values", "interrupts", "error") if isinstance(getattr(state, f), dict)]
    sealed = await holder.encryption.encrypt_fields("thread", vars(state), fields)
    return replace(state, **{field: sealed[field] for field in fields})


async def opened_run(holder: EncryptionHolder, run: RunRecord) -> RunRecord:
    """The stored run with its metadata, output, error and the caller's data in its kwargs
    (input, config, context, command) decrypted (the run itself without custom
    encryption)."""
    if holder.encryption is None:
        return run
    return await holder.encryption.open_run(run)


async def opened_thread(
    holder: EncryptionHolder, thread: ThreadRecord, fields: Iterable[str] = THREAD_FIELDS
) -> ThreadRecord:
    """The stored thread with these JSON columns (by default all it has) decrypted (the
    thread itself without custom encryption)."""
    if holder.encryption is None:
        return thread
    return await holder.encryption.open_thread(thread, fields)


async def opened_cron(holder: EncryptionHolder, cron: CronRecord) -> CronRecord:
    """The stored cron with its metadata and the caller's data in its payload (input,
    config, context) decrypted (the cron itself without custom encryption)."""
    if holder.encryption is None:
        return cron
    return await holder.encryption.open_cron(cron)
