"""What the records of stored rows share: each is a frozen, slotted dataclass with one field
per column it reads, built from a row by name; a record with JSON columns names them, for
a custom encryptor to read and for opening to replace."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import Field, fields, replace
from typing import Any, ClassVar, Self


def column_names(record: type[StoredRow]) -> tuple[str, ...]:
    """The columns a record reads: its fields, in order."""
    names = _COLUMN_NAMES.get(record)
    if names is None:
        names = _COLUMN_NAMES[record] = tuple(field.name for field in fields(record))
    return names


_COLUMN_NAMES: dict[type[StoredRow], tuple[str, ...]] = {}


class StoredRow:
    """The base of the records of stored rows (each a frozen, slotted dataclass)."""

    __slots__ = ()
    __dataclass_fields__: ClassVar[dict[str, Field[Any]]]
    # The JSON columns, by name.
    JSON_COLUMNS: ClassVar[tuple[str, ...]] = ()
    # Columns read into a type of their own (a status into its enum), by name.
    TYPED_COLUMNS: ClassVar[Mapping[str, Callable[[Any], Any]]] = {}

    @classmethod
    def from_row(cls, row: Mapping[Any, Any]) -> Self:
        """The record of a row holding every column it reads (other keys are ignored)."""
        values = {name: row[name] for name in column_names(cls)}
        for name, typed in cls.TYPED_COLUMNS.items():
            values[name] = typed(values[name])
        return cls(**values)

    def with_json(self, values: Mapping[str, Any]) -> Self:
        """A copy with these JSON columns replaced (decrypted, say)."""
        return replace(self, **{name: values[name] for name in self.JSON_COLUMNS if name in values})

    def json_columns(self) -> dict[str, Any]:
        """The JSON columns, by name, as a custom encryptor reads them."""
        return {name: getattr(self, name) for name in self.JSON_COLUMNS}
