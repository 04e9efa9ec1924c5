"""Creates the FastAPI application; nothing runs at import."""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import APIRouter, Depends, FastAPI
from fastapi.dependencies.utils import get_flat_params
from fastapi.routing import APIRoute
from starlette.applications import Starlette
from starlette.middleware.cors import CORSMiddleware

from runyard import __version__
from runyard.api import a2a, assistants, crons, docs, mcp, runs, store, system, threads, ui
from runyard.api.cors import allowed_origins, cors_options, private_network_allowed
from runyard.api.custom_app import (
    Lifespan,
    custom_lifespan,
    load_custom_app,
    merge_custom_app,
    mount_under_prefix,
)
from runyard.api.deps import Access, get_caller
from runyard.api.errors import JsonServerErrors, install_error_handlers
from runyard.api.limits import BodySizeLimitMiddleware
from runyard.api.responses import error_responses
from runyard.api.routing import (
    ProtocolRoute,
    install_method_not_allowed,
    reserve_literal_paths,
)
from runyard.api.thread_session import router as session_router
from runyard.api.thread_session_ws import thread_socket
from runyard.console import api as console_api
from runyard.console import page as console_page
from runyard.console.access import TURN_ON, console_enabled, require_operator
from runyard.domain.errors import ConfigError
from runyard.domain.langgraph_env import CONFIG_ENV_NAMES, unsupported_names
from runyard.observability.logs import configure_logging, drop_startup_traceback
from runyard.observability.metrics import HttpMetricsMiddleware
from runyard.project.config import ProjectConfig, apply_environment
from runyard.project.config_env import load_project
from runyard.project.http_config import HttpConfig
from runyard.project.modules import one_line
from runyard.settings import Settings, setting_names
from runyard.wiring.runtime import Runtime

log = logging.getLogger("runyard.app")

# The resource routers, by the `http.disable_*` switch that removes them (crons are runs).
RESOURCE_ROUTERS = (
    ("assistants", assistants.router),
    ("threads", threads.router),
    ("threads", session_router),
    ("runs", runs.router),
    ("runs", crons.router),
    ("store", store.router),
    ("mcp", mcp.router),
    ("a2a", a2a.router),
    ("ui", ui.router),
)
# Served with `http.disable_meta` too: an operator still sees that the server is up.
PROBES = frozenset({"/ok", "/health", "/livez", "/readyz"})
# The system routes a custom app may replace, as on LangGraph Platform.
SHADOWABLE = frozenset({"/", "/info"})


def create_app(settings: Settings | None = None) -> FastAPI:
    """The Runyard app for these settings; its lifespan starts and stops the runtime."""
    settings = settings or Settings()
    configure_logging(settings)
    project, custom, failure = _load_project(settings)
    _name_unsupported_settings()
    http = project.http_config if project is not None else HttpConfig()
    cors, failure = _cors(settings, project, http, failure)
    runtime = Runtime(settings, project)
    app = FastAPI(
        title="Runyard",
        version=__version__,
        description="A self-hosted agent server for LangGraph graphs over the Agent Protocol.",
        lifespan=_lifespan(runtime, failure, custom_lifespan(custom)),
        # Served by runyard.api.docs: Swagger UI with no CDN, all three behind auth if asked.
        openapi_url=None,
        docs_url=None,
        redoc_url=None,
    )
    install_error_handlers(app)
    _add_system_routes(app, settings, http, bool(project and (project.auth or {}).get("path")))
    _add_console(app, settings)
    system_routes = list(app.router.routes)
    _add_resource_routes(app, http)
    protected = app.router.routes[len(system_routes) :]
    reserve_literal_paths(app)
    install_method_not_allowed(app)
    # Added first = innermost: metrics count its 500s and CORS applies to them.
    app.add_middleware(JsonServerErrors)
    # Added last = outermost: latency covers the whole request, 413s included.
    app.add_middleware(BodySizeLimitMiddleware, limit=settings.max_body_bytes)
    app.add_middleware(HttpMetricsMiddleware, metrics=runtime.metrics)
    if custom is not None:
        meta_after = [r for r in system_routes if getattr(r, "path", None) in SHADOWABLE]
        meta_first = [r for r in system_routes if r not in meta_after]
        merge_custom_app(app, custom, http, meta_first, meta_after, protected)
        log.info("custom_app_mounted app=%s routes=%s", http.app, len(custom.router.routes))
    # After the custom app's state replaced the app's: the runtime, for the server to drain.
    app.state.runtime = runtime
    # Outside the other middleware and the custom app's, so a browser can read their answers
    # too (a 413, a custom route's).
    app.add_middleware(CORSMiddleware, **cors)
    runtime.tracing.instrument(app)
    # As LangGraph's server: the MOUNT_PREFIX setting wins over http.mount_prefix.
    prefix = settings.mount_prefix or http.mount_prefix
    if prefix:
        probes = [
            r for r in system_routes if getattr(r, "path", None) in PROBES | {"/", "/metrics"}
        ]
        return mount_under_prefix(app, prefix, probes)
    return app


def create_dev_app() -> FastAPI:
    """The app `runyard dev` serves (its reloader imports it by name): the environment's
    settings with developer defaults on, which no other mode has."""
    return create_app(Settings().enable_dev_mode())


def _add_system_routes(
    app: FastAPI, settings: Settings, http: HttpConfig, auth_configured: bool
) -> None:
    """The probes, and unless `http.disable_meta` the meta routes, metrics and docs."""
    meta = http.enabled("meta")
    add_routes(app, _system_router(meta))
    if meta:
        metrics_guard = system.metrics_guard(settings.metrics_token, auth_configured)
        add_routes(app, system.metrics_router, dependencies=[Depends(metrics_guard)])
        # Open unless RUNYARD_AUTH_METRICS_AND_DOCS.
        guard = [Depends(get_caller)] if settings.auth_metrics_and_docs else None
        add_routes(app, docs.router, dependencies=guard)
        add_routes(app, docs.assets_router)
    if http.enabled("ui"):
        # Open, as on LangGraph Platform: a `<script src>` cannot send credentials.
        add_routes(app, ui.assets_router)


def _add_console(app: FastAPI, settings: Settings) -> None:
    """The operator console and its API, when this instance has a way to let operators in
    (always under `runyard dev`); otherwise one line saying how to turn it on."""
    if not console_enabled(settings, settings.dev_mode):
        log.info("console_off reason=%s", f"no operator credential is configured; {TURN_ON}")
        return
    add_routes(app, console_page.router)
    add_routes(app, console_api.router, dependencies=[Depends(require_operator)])
    log.info("console_on path=/console")


def _add_resource_routes(app: FastAPI, http: HttpConfig) -> None:
    """The resource routes `http` leaves enabled.

    Every resource route authenticates; the probes (terse to a caller the authenticate
    handler refuses), and by default /metrics and the docs, stay open.
    """
    for group, router in RESOURCE_ROUTERS:
        if http.enabled(group):
            add_routes(app, router, dependencies=[Depends(get_caller)])
    if http.enabled("threads"):
        # The session's WebSocket authenticates itself (it answers refusals as close codes).
        app.add_api_websocket_route("/threads/{thread_id}/stream/events", thread_socket)


def _lifespan(
    runtime: Runtime, failure: ConfigError | None, user_lifespan: Lifespan | None
) -> Lifespan:
    """Start the runtime (or report the configuration error), then the custom app's lifespan."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[Any]:
        try:
            if failure is not None:
                raise failure
            # A failed start unwinds what it started (connections, their threads, loops),
            # so the process exits at once instead of waiting on them.
            await runtime.start()
            _expose(app, runtime)
        except ConfigError as exc:
            # The message says what to fix; a traceback of Runyard's own frames would bury it.
            log.error("startup_failed error=%s", exc)
            drop_startup_traceback(type(exc))
            raise
        except Exception as exc:
            # The start-up's boundary: anything else that stops it (an embedder without its
            # credentials, a database that is not there) is one line too; the traceback is
            # kept at DEBUG for whoever needs it.
            log.error("startup_failed error=%s", one_line(exc))
            log.debug("startup_failed_traceback", exc_info=exc)
            drop_startup_traceback(type(exc))
            raise
        try:
            if user_lifespan is None:
                yield None
            else:
                async with user_lifespan(app) as state:
                    yield state
        finally:
            await runtime.stop()

    return lifespan


def _name_unsupported_settings() -> None:
    """One warning naming every setting of LangGraph's server that is set and that Runyard
    does not read (after the project's `env` is applied: it may set them too)."""
    names = unsupported_names(os.environ, [*setting_names(), *CONFIG_ENV_NAMES.values()])
    if names:
        log.warning(
            "langgraph_settings_not_supported names=%s reason=%s",
            ",".join(names),
            "LangGraph's server reads them, Runyard does not; see Configuration in the docs",
        )


def _expose(app: Starlette, runtime: Runtime) -> None:
    """Put on the app's state what its routes read, now that the runtime has built it: the
    routes reach the services and the request checks, never the runtime."""
    app.state.services = runtime.services
    app.state.access = Access(runtime.auth, runtime.encryption, runtime.http.headers)
    app.state.settings = runtime.settings
    app.state.ui = runtime.ui


def _load_project(
    settings: Settings,
) -> tuple[ProjectConfig | None, Starlette | None, ConfigError | None]:
    """The project config and its custom app, read before the routes are laid out.

    A configuration error is kept to fail the start-up (the lifespan), where every
    configuration problem is reported the same way.
    """
    try:
        project = load_project(settings.config_path)
        apply_environment(project)
        return project, load_custom_app(project, project.http_config), None
    except ConfigError as exc:
        return None, None, exc


def _cors(
    settings: Settings, project: ProjectConfig | None, http: HttpConfig, failure: ConfigError | None
) -> tuple[dict[str, Any], ConfigError | None]:
    """CORS options from the settings and `http.cors`; a bad section fails the start-up."""
    origins = allowed_origins(settings)
    private_network = private_network_allowed(settings)
    try:
        source = project.path if project is not None else None
        return cors_options(origins, private_network, {"cors": http.cors}, source), failure
    except ConfigError as exc:
        return cors_options(origins, private_network), failure or exc


def _system_router(meta: bool) -> APIRouter:
    if meta:
        return system.router
    router = APIRouter()
    router.routes.extend(r for r in system.router.routes if getattr(r, "path", None) in PROBES)
    return router


def add_routes(app: FastAPI, router: APIRouter, dependencies: list[Any] | None = None) -> None:
    """Put the router's routes on the app itself instead of including the router.

    FastAPI keeps an included router nested and matches a request against its routes twice,
    saving and restoring scope keys around every candidate; under load that was about a
    tenth of the server's CPU. Routes of the app itself are matched once, by their regex.
    """
    for route in router.routes:
        if not isinstance(route, APIRoute):
            raise TypeError(f"only API routes can be added this way, not {route!r}")
        errors = error_responses(
            sorted(route.methods or ())[0],
            route.path,
            authenticated=bool(dependencies),
            has_body=route.body_field is not None,
            has_params=bool(get_flat_params(route.dependant)),
        )
        app.router.add_api_route(
            route.path,
            route.endpoint,
            response_model=route.response_model,
            status_code=route.status_code,
            tags=route.tags,
            dependencies=[*(dependencies or []), *route.dependencies],
            summary=route.summary,
            description=route.description,
            response_description=route.response_description,
            responses={**errors, **route.responses},
            deprecated=route.deprecated,
            methods=route.methods,
            operation_id=route.operation_id,
            response_model_exclude_none=route.response_model_exclude_none,
            response_model_exclude_unset=route.response_model_exclude_unset,
            include_in_schema=route.include_in_schema,
            response_class=route.response_class,
            name=route.name,
            openapi_extra=route.openapi_extra,
            route_class_override=ProtocolRoute,
        )
