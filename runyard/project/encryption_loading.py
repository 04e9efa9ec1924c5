"""Loads the `langgraph_sdk.Encryption` object `encryption.path` names, as `auth.path` is loaded."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

from runyard.domain.errors import ConfigError
from runyard.project.modules import import_attribute

if TYPE_CHECKING:
    from runyard.encryption.custom import CustomEncryption
    from runyard.project.config import ProjectConfig

log = logging.getLogger("runyard.encryption")


def load_encryption(project: ProjectConfig) -> CustomEncryption | None:
    """The handlers of `encryption.path`, or None (nothing imported) when it is not set."""
    path = (project.encryption or {}).get("path")
    if not path:
        return None
    if not isinstance(path, str) or ":" not in path:
        raise ConfigError(f"encryption.path must be 'path/to/file.py:attribute', got {path!r}")
    from langgraph_sdk import Encryption

    from runyard.encryption.custom import CustomEncryption

    file_part, attribute = path.rsplit(":", 1)
    base = project.path.parent if project.path else Path.cwd()
    file = (base / file_part).resolve()
    found = import_attribute(file, attribute, "runyard_encryption", "encryption.path")
    if not isinstance(found, Encryption):
        raise ConfigError(
            f"encryption.path: {file}:{attribute} must be a langgraph_sdk.Encryption instance, "
            f"got {type(found).__name__}"
        )
    encryption = CustomEncryption(found, path)
    log.info("custom_encryption path=%s handlers=%s", path, encryption.describe())
    return encryption
