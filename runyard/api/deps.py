"""Dependencies shared by the routes."""

from __future__ import annotations

import asyncio
import base64
import binascii
import importlib
import json
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any

from fastapi import Depends, Path, Request, Response

from runyard.api.custom_app import CALLER_SCOPE_KEY
from runyard.auth.handlers import Caller, authenticate
from runyard.auth.user import caller_configurable
from runyard.domain.encryption_context import use_context
from runyard.domain.errors import InvalidInputError, RunyardError
from runyard.project.http_config import HeaderPatterns
from runyard.project.ui_bundles import UiBundles
from runyard.sdk_handlers import AuthHandlers
from runyard.services.assistants import AssistantService
from runyard.services.catalog import Services
from runyard.services.crons import CronService
from runyard.services.health import HealthChecks, InstanceInfo
from runyard.services.metrics_report import MetricsReport
from runyard.services.retention import ThreadRetention
from runyard.services.run_waits import RunWaits
from runyard.services.runs import RunService
from runyard.services.session_commands import SessionCommands
from runyard.services.store import StoreService
from runyard.services.thread_session import ThreadSession
from runyard.services.thread_state import ThreadStateService
from runyard.services.thread_streams import ThreadStreams
from runyard.services.threads import ThreadService
from runyard.settings import Settings

if TYPE_CHECKING:
    from runyard.encryption.custom import CustomEncryption


@dataclass(frozen=True)
class Access:
    """What every request is checked against: the project's auth handlers, its encryption
    context handler, and the request headers a new run takes into `configurable`."""

    auth: AuthHandlers | None
    encryption: CustomEncryption | None
    run_headers: HeaderPatterns


def services_of(request: Request) -> Services:
    """The services of this app's instance (on the app's state once the instance started).

    The dependencies below are async: FastAPI runs them on the loop, not in a thread.
    """
    services: Services = request.app.state.services
    return services


def access_of(request: Request) -> Access:
    """What requests to this app are checked against (on the app's state once started)."""
    access: Access = request.app.state.access
    return access


async def get_settings(request: Request) -> Settings:
    """The settings of this app's instance."""
    settings: Settings = request.app.state.settings
    return settings


async def get_ui(request: Request) -> UiBundles:
    """The project's UI bundles."""
    ui: UiBundles = request.app.state.ui
    return ui


async def get_store_service(request: Request) -> StoreService:
    """The store's use cases."""
    return services_of(request).store


async def get_assistant_service(request: Request) -> AssistantService:
    """The assistants' use cases."""
    return services_of(request).assistants


async def get_cron_service(request: Request) -> CronService:
    """The crons' use cases."""
    return services_of(request).crons


async def get_run_service(request: Request) -> RunService:
    """The runs' use cases."""
    return services_of(request).runs


async def get_thread_service(request: Request) -> ThreadService:
    """The threads' use cases."""
    return services_of(request).threads


async def get_thread_state(request: Request) -> ThreadStateService:
    """A thread's state: read, history, update."""
    return services_of(request).thread_state


async def get_retention(request: Request) -> ThreadRetention:
    """Thread pruning."""
    return services_of(request).retention


async def get_run_waits(request: Request) -> RunWaits:
    """Waiting for runs, their events and results."""
    return services_of(request).waits


async def get_thread_streams(request: Request) -> ThreadStreams:
    """A thread's event stream."""
    return services_of(request).thread_streams


async def get_thread_session(request: Request) -> ThreadSession:
    """A thread's streaming session."""
    return services_of(request).session


async def get_session_commands(request: Request) -> SessionCommands:
    """The commands of a thread's streaming session."""
    return services_of(request).commands


@dataclass(frozen=True)
class RunServices:
    """What the run routes use: runs, waiting for them, and the threads and assistants a
    new run is checked against."""

    runs: RunService
    waits: RunWaits
    threads: ThreadService
    assistants: AssistantService


async def get_run_services(request: Request) -> RunServices:
    """The services of the run routes."""
    services = services_of(request)
    return RunServices(services.runs, services.waits, services.threads, services.assistants)


@dataclass(frozen=True)
class SessionServices:
    """What a thread's streaming session uses: its events, its commands, and the threads
    and assistants its runs are checked against."""

    threads: ThreadService
    assistants: AssistantService
    session: ThreadSession
    commands: SessionCommands


def session_services_of(services: Services) -> SessionServices:
    """The services of the streaming session, over HTTP or a WebSocket."""
    return SessionServices(
        services.threads, services.assistants, services.session, services.commands
    )


async def get_session_services(request: Request) -> SessionServices:
    """The services of the streaming session's routes."""
    return session_services_of(services_of(request))


async def get_health(request: Request) -> HealthChecks:
    """The probes' checks of this instance."""
    return services_of(request).health


async def get_metrics_report(request: Request) -> MetricsReport:
    """This instance's metrics and the queue figures."""
    return services_of(request).metrics


async def get_instance_info(request: Request) -> InstanceInfo:
    """What /info tells of this instance."""
    return services_of(request).info


SettingsDep = Annotated[Settings, Depends(get_settings)]
UiDep = Annotated[UiBundles, Depends(get_ui)]
StoreServiceDep = Annotated[StoreService, Depends(get_store_service)]
AssistantServiceDep = Annotated[AssistantService, Depends(get_assistant_service)]
CronServiceDep = Annotated[CronService, Depends(get_cron_service)]
RunServiceDep = Annotated[RunService, Depends(get_run_service)]
ThreadServiceDep = Annotated[ThreadService, Depends(get_thread_service)]
ThreadStateDep = Annotated[ThreadStateService, Depends(get_thread_state)]
RetentionDep = Annotated[ThreadRetention, Depends(get_retention)]
RunWaitsDep = Annotated[RunWaits, Depends(get_run_waits)]
ThreadStreamsDep = Annotated[ThreadStreams, Depends(get_thread_streams)]
ThreadSessionDep = Annotated[ThreadSession, Depends(get_thread_session)]
SessionCommandsDep = Annotated[SessionCommands, Depends(get_session_commands)]
RunServicesDep = Annotated[RunServices, Depends(get_run_services)]
SessionServicesDep = Annotated[SessionServices, Depends(get_session_services)]
HealthDep = Annotated[HealthChecks, Depends(get_health)]
MetricsReportDep = Annotated[MetricsReport, Depends(get_metrics_report)]
InstanceInfoDep = Annotated[InstanceInfo, Depends(get_instance_info)]


async def get_caller(request: Request) -> Caller:
    """The authenticated caller (anonymous when no auth is configured); 401 otherwise.

    With `encryption.path` configured, the request's encryption context is derived from
    the caller here, once, for everything the request stores.
    """
    # Straight from the app, not as a sub-dependency: FastAPI resolves each sub-dependency
    # anew on every request, and this one is on nearly every route.
    access = access_of(request)
    # Authenticated already by the route's middleware (`http.middleware_order: auth_first`).
    known = request.scope.get(CALLER_SCOPE_KEY)
    caller = known if isinstance(known, Caller) else await authenticate(access.auth, request)
    if access.encryption is not None:
        initial = requested_encryption_context(request)
        use_context(await access.encryption.derive_context(caller.user, initial))
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
    chosen = access_of(request).run_headers.select(request.headers.items())
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
