"""Dependencies shared by the routes."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from app.runtime import Runtime


def get_runtime(request: Request) -> Runtime:
    """The runtime that owns this app's parts."""
    runtime: Runtime = request.app.state.runtime
    return runtime


RuntimeDep = Annotated[Runtime, Depends(get_runtime)]
