"""An assistant as stored, and each of its versions: frozen records, built once in `db/`
from their rows and read by attribute everywhere above. JSON columns stay plain values; the
API turns a record into the Agent Protocol's JSON at its edge (`schemas/assistants.py`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar, TypeVar

from runyard.domain.stored import StoredRow, column_names


@dataclass(frozen=True, slots=True)
class AssistantRecord(StoredRow):
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

    JSON_COLUMNS: ClassVar[tuple[str, ...]] = ("config", "context", "metadata")


ASSISTANT_COLUMNS = column_names(AssistantRecord)


@dataclass(frozen=True, slots=True)
class AssistantVersionRecord(StoredRow):
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

    JSON_COLUMNS: ClassVar[tuple[str, ...]] = ("config", "context", "metadata")

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


VERSION_COLUMNS = column_names(AssistantVersionRecord)

# Either record of an assistant: what opening its JSON (encryption.path) keeps the type of.
StoredAssistant = TypeVar("StoredAssistant", AssistantRecord, AssistantVersionRecord)


def assistant_or_none(row: Mapping[Any, Any] | None) -> AssistantRecord | None:
    """`AssistantRecord.from_row`, passing None through."""
    return None if row is None else AssistantRecord.from_row(row)
