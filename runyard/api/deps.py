"""Dependencies shared by the routes."""

from __future__ import annotations

import asyncio
import base64
import binascii
import importlib
import json
import uuid
from typing import Annotated, Any

from fastapi import Depends, Path, Request, Response

from runyard.api.custom_app import CALLER_SCOPE_KEY
from runyard.auth.handlers import Caller, authenticate
from runyard.auth.user import caller_configurable
from runyard.domain.encryption_context import use_context
from runyard.domain.errors import InvalidInputError, RunyardError
from runyard.runtime import Runtime
from runyard.services.catalog import Services
from runyard.services.health import HealthChecks, InstanceInfo
from runyard.services.metrics_report import MetricsReport
from runyard.services.store import StoreService


async def get_runtime(request: Request) -> Runtime:
    """The runtime that owns this app's parts (async: FastAPI runs it on the loop, no thread)."""
    runtime: Runtime = request.app.state.runtime
    return runtime


RuntimeDep = Annotated[Runtime, Depends(get_runtime)]


def services_of(request: Request) -> Services:
    """The services of this app's instance (on the app's state once the instance started)."""
    services: Services = request.app.state.services
    return services


async def get_store_service(request: Request) -> StoreService:
    """The store's use cases."""
    return services_of(request).store


async def get_health(request: Request) -> HealthChecks:
    """The probes' checks of this instance."""
    return services_of(request).health


async def get_metrics_report(request: Request) -> MetricsReport:
    """This instance's metrics and the queue figures."""
    return services_of(request).metrics


async def get_instance_info(request: Request) -> InstanceInfo:
    """What /info tells of this instance."""
    return services_of(request).info


StoreServiceDep = Annotated[StoreService, Depends(get_store_service)]
HealthDep = Annotated[HealthChecks, Depends(get_health)]
MetricsReportDep = Annotated[MetricsReport, Depends(get_metrics_report)]
InstanceInfoDep = Annotated[InstanceInfo, Depends(get_instance_info)]


async def get_caller(request: Request) -> Caller:
    """The authenticated caller (anonymous when no auth is configured); 401 otherwise.

    With `encryption.path` configured, the request's encryption context is derived from
    the caller here, once, for everything the request stores.
    """
    # The runtime straight from the app, not as a sub-dependency: FastAPI resolves each
    # sub-dependency anew on every request, and this one is on nearly every route.
    runtime: Runtime = request.app.state.runtime
    # Authenticated already by the route's middleware (`http.middleware_order: auth_first`).
    known = request.scope.get(CALLER_SCOPE_KEY)
    caller = known if isinstance(known, Caller) else await authenticate(runtime.auth, request)
    if runtime.encryption is not None:
        initial = requested_encryption_context(request)
        use_context(await runtime.encryption.derive_context(caller.user, initial))
    return caller


def requested_encryption_context(request: Request) -> dict[str, Any]:
    """The `X-Encryption-Context` header (base64 of a JSON object, as LangGraph's server
    reads it), the context handler's starting point; a 422 when it is malformed."""
    header = request.headers.get("x-encryption-context")
    if not header:
        return {}
    try:
        context = json.loads(base64.b64decode(header, validate=True))
    except (ValueError, binascii.Error):
        context = None
    if not isinstance(context, dict):
        raise InvalidInputError("X-Encryption-Context must be the base64 encoding of a JSON object")
    return context


CallerDep = Annotated[Caller, Depends(get_caller)]


async def is_insider(request: Request) -> bool:
    """Whether the authenticate handler accepts the caller (always, with no auth configured):
    what the open routes may tell it beyond their status."""
    try:
        await get_caller(request)
    except RunyardError:
        return False
    return True


async def get_run_configurable(request: Request, caller: CallerDep) -> dict[str, Any]:
    """What the server puts in a new run's `configurable`: the request headers that
    `http.configurable_headers` selects, then the authenticated user."""
    runtime: Runtime = request.app.state.runtime
    chosen = runtime.http.headers.select(request.headers.items())
    return {**chosen, **caller_configurable(caller)}


RunConfigurableDep = Annotated[dict[str, Any], Depends(get_run_configurable)]


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


async def preload(*modules: str) -> None:
    """Import modules off the event loop (a first import of a heavy SDK takes about a second)."""
    for name in modules:
        await asyncio.to_thread(importlib.import_module, name)
