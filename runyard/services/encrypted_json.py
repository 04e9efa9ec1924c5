"""The JSON of threads and runs through the custom encryption's JSON handlers
(`encryption.path`), where the services write and read it; nothing without it."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from runyard.runtime import Runtime


async def sealed(runtime: Runtime, model: str, field: str, data: Any) -> Any:
    """`data` as it is stored: its values encrypted, the caller's context beside them."""
    if runtime.encryption is None:
        return data
    return await runtime.encryption.encrypt_json(model, field, data)


async def opened(runtime: Runtime, model: str, row: Any, fields: Iterable[str]) -> Any:
    """A copy of the stored `row` with these JSON fields decrypted (the row itself without
    custom encryption)."""
    if runtime.encryption is None or row is None:
        return row
    return await runtime.encryption.decrypt_fields(model, dict(row), fields)
