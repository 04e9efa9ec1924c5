"""`/mcp`: every assistant as a tool, over MCP's streamable HTTP transport (stateless).

Mounted unless `http.disable_mcp` is set in the project config.
"""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from runyard.api.deps import CallerDep, RunConfigurableDep, RuntimeDep, preload

router = APIRouter(tags=["MCP"])


@router.post("/mcp", response_model=None)
async def mcp_post(
    request: Request, runtime: RuntimeDep, caller: CallerDep, configurable: RunConfigurableDep
) -> Response:
    """One JSON-RPC message of the Model Context Protocol (streamable HTTP transport)."""
    # Loaded on first use: the wire models and the schema validator cost resident memory
    # (about 6 MiB) on every instance, most of which never serve MCP.
    await preload("runyard.api.mcp_rpc")
    from runyard.api import mcp_rpc

    return await mcp_rpc.answer(runtime, caller, configurable, request)


@router.get("/mcp", response_model=None)
async def mcp_get() -> Response:
    """No server-initiated stream: the endpoint is stateless, every answer rides its request."""
    return Response(status_code=405, headers={"Allow": "POST"})


@router.delete("/mcp", response_model=None)
async def mcp_delete() -> Response:
    """No sessions to terminate: the endpoint is stateless."""
    return Response(status_code=405, headers={"Allow": "POST"})
