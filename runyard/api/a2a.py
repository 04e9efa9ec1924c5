"""`/a2a/{assistant_id}`: every assistant as an Agent2Agent agent (JSON-RPC, A2A 1.0 and 0.3).

The `a2a-sdk` dispatcher parses requests and writes answers (both protocol versions); the
tasks behind it are Runyard runs, handled by `AssistantTasks`. Mounted unless
`http.disable_a2a` is set in the project config.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request, Response
from fastapi.responses import JSONResponse

from runyard.api.bodies import json_rpc_invalid_params, request_id_of
from runyard.api.deps import CallerDep, RunConfigurableDep, RunServices, RunServicesDep, preload
from runyard.api.responses import ErrorBody
from runyard.auth.guards import require_assistant
from runyard.auth.handlers import Caller

router = APIRouter(tags=["A2A"])

AssistantId = Annotated[
    str, Path(description="An assistant id (UUID), or a graph id for its default assistant.")
]


@router.post("/a2a/{assistant_id}", response_model=None)
async def a2a_post(
    assistant_id: AssistantId,
    request: Request,
    svc: RunServicesDep,
    caller: CallerDep,
    configurable: RunConfigurableDep,
) -> Response:
    """One A2A JSON-RPC request: message/send, message/stream, tasks/get, tasks/cancel."""
    # Loaded on first use: protobuf, the SDK's dispatcher and the grpc it imports cost about
    # 20 MiB of resident memory on every instance, most of which never serve A2A.
    await preload(
        "a2a.server.routes.jsonrpc_dispatcher", "runyard.api.a2a_tasks", "runyard.api.a2a_params"
    )
    from a2a.server.routes.jsonrpc_dispatcher import JsonRpcDispatcher

    from runyard.api.a2a_params import params_problem
    from runyard.api.a2a_tasks import AssistantTasks

    body = await request.body()
    try:
        problem = params_problem(json.loads(body))
    except ValueError:
        problem = None  # not JSON: the dispatcher answers that
    if problem is not None:
        return JSONResponse(json_rpc_invalid_params(request_id_of(body), problem))
    tasks = AssistantTasks(svc, caller, assistant_id, configurable)
    dispatcher = JsonRpcDispatcher(tasks, enable_v0_3_compat=True)
    return await dispatcher.handle_requests(request)


@router.get("/a2a/{assistant_id}")
async def agent_card_at_agent_url(
    assistant_id: AssistantId, request: Request, svc: RunServicesDep, caller: CallerDep
) -> JSONResponse:
    """The agent card, for clients that GET the agent's URL itself."""
    return JSONResponse(await _card(svc, caller, assistant_id, request))


@router.get("/a2a/{assistant_id}/.well-known/agent-card.json")
async def agent_card_of(
    assistant_id: AssistantId, request: Request, svc: RunServicesDep, caller: CallerDep
) -> JSONResponse:
    """The agent card of an assistant."""
    return JSONResponse(await _card(svc, caller, assistant_id, request))


@router.get("/a2a/{assistant_id}/.well-known/agent.json", include_in_schema=False)
async def legacy_agent_card_of(
    assistant_id: AssistantId, request: Request, svc: RunServicesDep, caller: CallerDep
) -> JSONResponse:
    """The agent card at the path of A2A 0.2."""
    return JSONResponse(await _card(svc, caller, assistant_id, request))


@router.get(
    "/.well-known/agent-card.json",
    responses={404: {"model": ErrorBody, "description": "No such assistant, or one not visible."}},
)
async def root_agent_card(
    request: Request,
    svc: RunServicesDep,
    caller: CallerDep,
    assistant_id: Annotated[
        str,
        Query(
            description="The assistant to describe (or GET /a2a/ID/.well-known/agent-card.json)."
        ),
    ],
) -> JSONResponse:
    """The agent card of the assistant named by `?assistant_id=`."""
    return JSONResponse(await _card(svc, caller, assistant_id, request))


async def _card(
    svc: RunServices, caller: Caller, assistant_id: str, request: Request
) -> dict[str, Any]:
    await require_assistant(svc.assistants, caller, assistant_id, "read")
    assistant = await svc.assistants.get_assistant(assistant_id)
    schemas = await svc.assistants.get_schemas(assistant.assistant_id)
    url = f"{str(request.base_url).rstrip('/')}/a2a/{assistant.assistant_id}"
    await preload("runyard.schemas.a2a")  # on first use, as above
    from runyard.schemas.a2a import agent_card

    return agent_card(assistant, schemas.get("input_schema") or {}, url)
