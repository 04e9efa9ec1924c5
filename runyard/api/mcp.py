"""`/mcp`: every assistant as a tool, over MCP's streamable HTTP transport (stateless).

Mounted unless `http.disable_mcp` is set in the project config.
"""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from runyard.api.deps import CallerDep, RunConfigurableDep, RunServicesDep, preload

router = APIRouter(tags=["MCP"])


@router.post(
    "/mcp",
    response_model=None,
    responses={
        400: {"description": "The body is not a JSON-RPC message (a JSON-RPC error answers it)."}
    },
)
async def mcp_post(
    request: Request, svc: RunServicesDep, caller: CallerDep, configurable: RunConfigurableDep
) -> Response:
    """One JSON-RPC message of the Model Context Protocol (streamable HTTP transport)."""
    # Loaded on first use: the wire models and the schema validator cost resident memory
    # (about 6 MiB) on every instance, most of which never serve MCP.
    await preload("runyard.api.mcp_rpc")
    from runyard.api import mcp_rpc

    return await mcp_rpc.answer(svc, caller, configurable, request)


# No GET (server-initiated stream) and no DELETE (session end): the endpoint is stateless, so
# the router answers both with 405 and `Allow: POST`, as MCP's transport asks of such a server.
