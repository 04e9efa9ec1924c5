"""An assistant as stored, and each of its versions: frozen records, built once in `db/`
from their rows and read by attribute everywhere above. JSON columns stay plain values; the
API turns a record into the Agent Protocol's JSON at its edge (`schemas/assistants.py`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from datetime import datetime
from typing import Any, TypeVar

# The JSON columns of an assistant and of its versions (every one an object).
_JSON = ("config", "context", "metadata")


@dataclass(frozen=True, slots=True)
class AssistantRecord:
    """One row of `assistants` (runyard/db/tables.py), column for column: the assistant at
    its current version."""

    assistant_id: str
    graph_id: str
    name: str
    description: str | None
    config: dict[str, Any]
    context: dict[str, Any]
    metadata: dict[str, Any]
    version: int
    created_at: datetime
    updated_at: datetime

    @classmethod
    def from_row(cls, row: Mapping[Any, Any]) -> AssistantRecord:
        """The record of a row holding every column of `assistants` (other keys are ignored)."""
        return cls(**{name: row[name] for name in ASSISTANT_COLUMNS})

    def with_json(self, values: Mapping[str, Any]) -> AssistantRecord:
        """A copy with these JSON columns replaced (decrypted, say)."""
        return replace(self, **{name: values[name] for name in _JSON if name in values})

    def json_columns(self) -> dict[str, Any]:
        """The JSON columns, by name, as a custom encryptor reads them."""
        return {name: getattr(self, name) for name in _JSON}


ASSISTANT_COLUMNS = tuple(f.name for f in fields(AssistantRecord))


@dataclass(frozen=True, slots=True)
class AssistantVersionRecord:
    """One row of `assistant_versions`, column for column: what an assistant was at one
    version, and becomes again when that version is made its current one."""

    assistant_id: str
    version: int
    graph_id: str
    name: str
    description: str | None
    config: dict[str, Any]
    context: dict[str, Any]
    metadata: dict[str, Any]
    created_at: datetime

    @classmethod
    def from_row(cls, row: Mapping[Any, Any]) -> AssistantVersionRecord:
        """The record of a row holding every column of `assistant_versions`."""
        return cls(**{name: row[name] for name in VERSION_COLUMNS})

    def with_json(self, values: Mapping[str, Any]) -> AssistantVersionRecord:
        """A copy with these JSON columns replaced (decrypted, say)."""
        return replace(self, **{name: values[name] for name in _JSON if name in values})

    def json_columns(self) -> dict[str, Any]:
        """The JSON columns, by name, as a custom encryptor reads them."""
        return {name: getattr(self, name) for name in _JSON}

    def current_columns(self) -> dict[str, Any]:
        """The columns of `assistants` this version sets when it becomes the current one."""
        return {
            "graph_id": self.graph_id,
            "name": self.name,
            "description": self.description,
            "config": self.config,
            "context": self.context,
            "metadata": self.metadata,
            "version": self.version,
        }


VERSION_COLUMNS = tuple(f.name for f in fields(AssistantVersionRecord))

# Either record of an assistant: what opening its JSON (encryption.path) keeps the type of.
StoredAssistant = TypeVar("StoredAssistant", AssistantRecord, AssistantVersionRecord)


def assistant_or_none(row: Mapping[Any, Any] | None) -> AssistantRecord | None:
    """`AssistantRecord.from_row`, passing None through."""
    return None if row is None else AssistantRecord.from_row(row)
