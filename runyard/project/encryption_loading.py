"""Loads the `langgraph_sdk.Encryption` object `encryption.path` names, as `auth.path` is loaded."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from runyard.project.path_objects import declared_path, load_path_object

if TYPE_CHECKING:
    from runyard.encryption.custom import CustomEncryption
    from runyard.project.config import ProjectConfig

log = logging.getLogger("runyard.encryption")


def load_encryption(project: ProjectConfig) -> CustomEncryption | None:
    """The handlers of `encryption.path`, or None (nothing imported) when it is not set."""
    if declared_path(project, "encryption") is None:
        return None
    from langgraph_sdk import Encryption

    from runyard.encryption.custom import CustomEncryption

    loaded = load_path_object(project, "encryption", Encryption)
    assert loaded is not None
    found, path = loaded
    encryption = CustomEncryption(found, path)
    log.info("custom_encryption path=%s handlers=%s", path, encryption.describe())
    return encryption
