"""Creates the FastAPI application; nothing runs at import."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import APIRouter, Depends, FastAPI
from fastapi.routing import APIRoute

from runyard import __version__
from runyard.api import assistants, crons, runs, store, system, threads
from runyard.api.deps import get_caller
from runyard.api.errors import install_error_handlers
from runyard.api.limits import BodySizeLimitMiddleware
from runyard.domain.errors import ConfigError
from runyard.observability.logs import configure_logging, drop_startup_traceback
from runyard.observability.metrics import HttpMetricsMiddleware
from runyard.runtime import Runtime
from runyard.settings import Settings

log = logging.getLogger("runyard.app")


def create_app(settings: Settings | None = None) -> FastAPI:
    """The Runyard app for these settings; its lifespan starts and stops the runtime."""
    settings = settings or Settings()
    configure_logging(settings)
    runtime = Runtime(settings)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        try:
            await runtime.start()
        except ConfigError as exc:
            # The message says what to fix; a traceback of Runyard's own frames would bury it.
            log.error("startup_failed error=%s", exc)
            drop_startup_traceback(ConfigError)
            raise
        try:
            yield
        finally:
            await runtime.stop()

    app = FastAPI(
        title="Runyard",
        version=__version__,
        description="A self-hosted agent server for LangGraph graphs over the Agent Protocol.",
        lifespan=lifespan,
    )
    app.state.runtime = runtime
    install_error_handlers(app)
    add_routes(app, system.router)
    # Every resource route authenticates; the system probes and docs stay open.
    for router in (assistants.router, threads.router, runs.router, crons.router, store.router):
        add_routes(app, router, dependencies=[Depends(get_caller)])
    # Added last = outermost: latency covers the whole request, 413s included.
    app.add_middleware(BodySizeLimitMiddleware, limit=settings.max_body_bytes)
    app.add_middleware(HttpMetricsMiddleware, metrics=runtime.metrics)
    runtime.tracing.instrument(app)
    return app


def add_routes(app: FastAPI, router: APIRouter, dependencies: list[Any] | None = None) -> None:
    """Put the router's routes on the app itself instead of including the router.

    FastAPI keeps an included router nested and matches a request against its routes twice,
    saving and restoring scope keys around every candidate; under load that was about a
    tenth of the server's CPU. Routes of the app itself are matched once, by their regex.
    """
    for route in router.routes:
        if not isinstance(route, APIRoute):
            raise TypeError(f"only API routes can be added this way, not {route!r}")
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
            responses=route.responses,
            deprecated=route.deprecated,
            methods=route.methods,
            operation_id=route.operation_id,
            response_model_exclude_none=route.response_model_exclude_none,
            response_model_exclude_unset=route.response_model_exclude_unset,
            include_in_schema=route.include_in_schema,
            response_class=route.response_class,
            name=route.name,
            openapi_extra=route.openapi_extra,
        )
