"""`/mcp`: every assistant as a tool, over MCP's streamable HTTP transport (stateless)."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from runyard.api.deps import CallerDep, RuntimeDep, preload
from runyard.domain.errors import NotFoundError
from runyard.runtime import Runtime

router = APIRouter(tags=["MCP"])


@router.post("/mcp", response_model=None)
async def mcp_post(request: Request, runtime: RuntimeDep, caller: CallerDep) -> Response:
    """One JSON-RPC message of the Model Context Protocol (streamable HTTP transport)."""
    _require_enabled(runtime)
    # Loaded on first use: the wire models and the schema validator cost resident memory
    # (about 6 MiB) on every instance, most of which never serve MCP.
    await preload("runyard.api.mcp_rpc")
    from runyard.api import mcp_rpc

    return await mcp_rpc.answer(runtime, caller, request)


@router.get("/mcp", response_model=None)
async def mcp_get(runtime: RuntimeDep) -> Response:
    """No server-initiated stream: the endpoint is stateless, every answer rides its request."""
    _require_enabled(runtime)
    return Response(status_code=405, headers={"Allow": "POST"})


@router.delete("/mcp", response_model=None)
async def mcp_delete(runtime: RuntimeDep) -> Response:
    """No sessions to terminate: the endpoint is stateless."""
    _require_enabled(runtime)
    return Response(status_code=405, headers={"Allow": "POST"})


def _require_enabled(runtime: Runtime) -> None:
    if runtime.project.disable_mcp:
        raise NotFoundError("the MCP endpoint is turned off (http.disable_mcp in the config)")
