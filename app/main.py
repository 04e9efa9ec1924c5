"""Creates the FastAPI application; nothing runs at import."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import Depends, FastAPI

from app import __version__
from app.api import assistants, crons, runs, store, system, threads
from app.api.deps import get_caller
from app.api.errors import install_error_handlers
from app.api.limits import BodySizeLimitMiddleware
from app.observability.logs import configure_logging
from app.observability.metrics import HttpMetricsMiddleware
from app.runtime import Runtime
from app.settings import Settings


def create_app(settings: Settings | None = None) -> FastAPI:
    """The Runyard app for these settings; its lifespan starts and stops the runtime."""
    settings = settings or Settings()
    configure_logging(settings)
    runtime = Runtime(settings)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await runtime.start()
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
    app.include_router(system.router)
    # Every resource route authenticates; the system probes and docs stay open.
    for router in (assistants.router, threads.router, runs.router, crons.router, store.router):
        app.include_router(router, dependencies=[Depends(get_caller)])
    # Added last = outermost: latency covers the whole request, 413s included.
    app.add_middleware(BodySizeLimitMiddleware, limit=settings.max_body_bytes)
    app.add_middleware(HttpMetricsMiddleware, metrics=runtime.metrics)
    runtime.tracing.instrument(app)
    return app
