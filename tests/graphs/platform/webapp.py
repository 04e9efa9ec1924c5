"""The project's own FastAPI app, served beside the API (`http.app`)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from platform_agent.graphs import FACTORY_EVENTS
from starlette.middleware.base import BaseHTTPMiddleware, RequestResponseEndpoint
from starlette.responses import Response


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    """Runs after the server's own start-up."""
    app.state.started = "yes"
    yield


app = FastAPI(lifespan=lifespan)


class SeenUser(BaseHTTPMiddleware):
    """Tells in a header whether authentication ran before this middleware."""

    async def dispatch(self, request: Request, call_next: RequestResponseEndpoint) -> Response:
        user = request.scope.get("user")
        response = await call_next(request)
        response.headers["x-middleware-saw"] = getattr(user, "identity", None) or "-"
        return response


app.add_middleware(SeenUser)


@app.get("/hello")
async def hello(request: Request) -> dict[str, Any]:
    """A custom route; with enable_custom_route_auth it sees the user."""
    user = request.scope.get("user")
    return {"hello": "world", "user": getattr(user, "identity", None)}


@app.get("/factory-events")
async def factory_events() -> list[str]:
    """What the context-manager factory did."""
    return FACTORY_EVENTS


@app.get("/started")
async def started(request: Request) -> dict[str, Any]:
    """Set by this app's lifespan."""
    return {"started": getattr(request.app.state, "started", None)}


@app.get("/info")
async def info() -> dict[str, Any]:
    """Replaces the server's /info, as LangGraph lets a custom app do."""
    return {"custom": True}


@app.post("/form")
async def form(request: Request) -> dict[str, Any]:
    """A body as this app receives it: the server reads bodies as JSON only on its own routes."""
    return {
        "content_type": request.headers.get("content-type"),
        "body": (await request.body()).decode(),
    }
