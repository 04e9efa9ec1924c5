"""Whether runs are traced to LangSmith, and under which project (for `langsmith_session_name`).

Runyard sends nothing to LangSmith itself: with LangSmith's tracing variables set, the
`langsmith` library that LangChain and LangGraph call traces a graph's execution as it would
in any process. This module only reads the same variables, so a run can name its project.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

# As LangGraph's server and the langsmith library read them: the first one set decides.
TRACING_VARIABLES = (
    "LANGSMITH_TRACING",
    "LANGSMITH_TRACING_V2",
    "LANGCHAIN_TRACING_V2",
    "LANGCHAIN_TRACING",
)
PROJECT_VARIABLES = ("LANGSMITH_PROJECT", "LANGCHAIN_PROJECT")


def langsmith_project(environ: Mapping[str, str] = os.environ) -> str | None:
    """The LangSmith project runs are traced to, or None when LangSmith tracing is off."""
    for name in TRACING_VARIABLES:
        value = environ.get(name)
        if value is not None and value != "":
            if value.strip().lower() not in ("1", "true", "yes", "on"):
                return None
            break
    else:
        return None
    for name in PROJECT_VARIABLES:
        if environ.get(name):
            return environ[name]
    return "default"
