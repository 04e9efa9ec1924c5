"""Dependencies shared by the routes."""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import Depends, Path, Request, Response

from runyard.auth.handlers import Caller, authenticate
from runyard.runtime import Runtime


async def get_runtime(request: Request) -> Runtime:
    """The runtime that owns this app's parts (async: FastAPI runs it on the loop, no thread)."""
    runtime: Runtime = request.app.state.runtime
    return runtime


RuntimeDep = Annotated[Runtime, Depends(get_runtime)]


async def get_caller(request: Request) -> Caller:
    """The authenticated caller (anonymous when no auth is configured); 401 otherwise."""
    # The runtime straight from the app, not as a sub-dependency: FastAPI resolves each
    # sub-dependency anew on every request, and this one is on nearly every route.
    return await authenticate(request.app.state.runtime.auth, request)


CallerDep = Annotated[Caller, Depends(get_caller)]


ThreadId = Annotated[uuid.UUID, Path(description="The thread's id (a UUID).")]
RunId = Annotated[uuid.UUID, Path(description="The run's id (a UUID).")]


def set_page_headers(response: Response, offset: int, size: int, next_offset: int | None) -> None:
    """X-Pagination headers as LangGraph Platform sets them: a lower bound of the total,
    and where the next page starts when there is one."""
    if next_offset is None:
        response.headers["X-Pagination-Total"] = str(offset + size)
    else:
        response.headers["X-Pagination-Total"] = str(next_offset + 1)
        response.headers["X-Pagination-Next"] = str(next_offset)
