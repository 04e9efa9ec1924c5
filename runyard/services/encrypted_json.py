"""The JSON of threads, runs, assistants and crons through the custom encryption's JSON handlers
(`encryption.path`), where the services write and read it; nothing without it."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from runyard.db.threads import ThreadState

if TYPE_CHECKING:
    from runyard.runtime import Runtime


async def sealed(runtime: Runtime, model: str, field: str, data: Any) -> Any:
    """`data` as it is stored: its values encrypted, the caller's context beside them."""
    if runtime.encryption is None:
        return data
    return await runtime.encryption.encrypt_json(model, field, data)


async def sealed_fields(runtime: Runtime, model: str, row: Any, fields: Iterable[str]) -> Any:
    """A copy of `row` with these JSON fields as they are stored (the row itself without
    custom encryption)."""
    if runtime.encryption is None or row is None:
        return row
    return await runtime.encryption.encrypt_fields(model, dict(row), fields)


async def opened(runtime: Runtime, model: str, row: Any, fields: Iterable[str]) -> Any:
    """A copy of the stored `row` with these JSON fields decrypted (the row itself without
    custom encryption)."""
    if runtime.encryption is None or row is None:
        return row
    return await runtime.encryption.decrypt_fields(model, dict(row), fields)


async def sealed_state(runtime: Runtime, state: ThreadState) -> ThreadState:
    """What a thread row caches of its state as it is stored: its values, interrupts and
    error through the JSON handlers (those that are objects; a graph's state may be a
    list, left as it is)."""
    if runtime.encryption is None:
        return state
    fields = [f for f in ("values", "interrupts", "error") if isinstance(getattr(state, f), dict)]
    sealed = await runtime.encryption.encrypt_fields("thread", vars(state), fields)
    return replace(state, **{field: sealed[field] for field in fields})


async def opened_run(runtime: Runtime, row: Any) -> Any:
    """A copy of a stored run with its metadata, output, error and the caller's data in its
    kwargs (input, config, context, command) decrypted (the row itself without custom
    encryption)."""
    if runtime.encryption is None or row is None:
        return row
    return await runtime.encryption.decrypt_run(dict(row))


async def opened_cron(runtime: Runtime, row: Any) -> Any:
    """A copy of a stored cron with its metadata and the caller's data in its payload
    (input, config, context) decrypted (the row itself without custom encryption)."""
    if runtime.encryption is None or row is None:
        return row
    return await runtime.encryption.decrypt_cron(dict(row))
