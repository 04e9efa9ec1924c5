"""Loads the project's `langgraph_sdk.Priority` object (`priority.path`) and calls its assign
function, as langgraph-sdk 0.4.14 documents it: at the first run on a thread that has no
settings, with a `PriorityContext`; it returns `PrioritySettings` or None for the defaults."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langgraph_sdk.priority import Priority
from langgraph_sdk.priority.types import PriorityContext

from runyard.domain.errors import ConfigError
from runyard.domain.priority import PriorityAssignError, PrioritySettings, settings_from
from runyard.domain.user import AuthUser
from runyard.project.config import ProjectConfig
from runyard.project.modules import one_line
from runyard.project.path_objects import load_path_object, project_file
from runyard.sdk_handlers import assign_function

log = logging.getLogger("runyard.priority")

# The user an assign function sees when the server has no auth: `user.identity` is empty.
_NOBODY = AuthUser(identity="", display_name="", is_authenticated=False)


@dataclass(frozen=True)
class NewRunFacts:
    """What the server knows of a run being created, for the assign function's context."""

    user: AuthUser | None
    thread_id: str | None
    thread_metadata: Mapping[str, Any]
    assistant_id: str
    graph_id: str
    assistant_metadata: Mapping[str, Any]
    run_metadata: Mapping[str, Any]
    cron_id: str | None


class PriorityAssigner:
    """Calls the project's `@priority.assign` function and validates what it returns."""

    def __init__(self, handler: Any, name: str) -> None:
        self._handler = handler
        self.name = name

    @classmethod
    def load(cls, project: ProjectConfig) -> PriorityAssigner | None:
        """The assigner `priority.path` names, or None when the config names none."""
        loaded = load_path_object(project, "priority", Priority)
        if loaded is None:
            return None
        priority, path = loaded
        file_part, attribute = path.rsplit(":", 1)
        file = project_file(project, file_part)
        handler = assign_function(priority)
        if handler is None:
            raise ConfigError(
                f"priority.path: {file}:{attribute} has no assign function; register one with "
                "@priority.assign"
            )
        name = f"{Path(file).name}:{getattr(handler, '__name__', 'assign')}"
        log.info("priority_enabled path=%s function=%s", path, name)
        return cls(handler, name)

    async def assign(self, facts: NewRunFacts) -> PrioritySettings:
        """The settings the function returns for this run's thread; PriorityAssignError
        naming the function when it raises or returns something unusable."""
        user = facts.user or _NOBODY
        context = PriorityContext(
            user=user,  # type: ignore[arg-type]
            permissions=list(user.permissions),
            thread_id=facts.thread_id,
            thread_metadata=dict(facts.thread_metadata),
            assistant_id=facts.assistant_id,
            graph_id=facts.graph_id,
            assistant_metadata=dict(facts.assistant_metadata),
            run_metadata=dict(facts.run_metadata),
            cron_id=facts.cron_id,
        )
        where = f"the priority assign function {self.name}"
        try:
            returned = await self._handler(context)
        except Exception as exc:
            log.warning("priority_assign_failed function=%s", self.name, exc_info=True)
            raise PriorityAssignError(
                f"{where} raised {one_line(exc)}; the run was not created"
            ) from exc
        try:
            return settings_from(returned, where)
        except PriorityAssignError as exc:
            raise PriorityAssignError(f"{exc.message}; the run was not created") from exc
