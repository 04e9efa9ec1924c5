"""Turns domain errors and validation failures into clear JSON 4xx responses."""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from app.domain.errors import RunyardError

log = logging.getLogger("runyard.api")


def install_error_handlers(app: FastAPI) -> None:
    """Register the handlers that shape every error body as {"detail": ...}."""

    @app.exception_handler(RunyardError)
    async def runyard_error(_request: Request, exc: RunyardError) -> JSONResponse:
        return JSONResponse({"detail": exc.message}, status_code=exc.status_code)

    @app.exception_handler(RequestValidationError)
    async def validation_error(_request: Request, exc: RequestValidationError) -> JSONResponse:
        problems = []
        for error in exc.errors():
            where = ".".join(str(part) for part in error.get("loc", ()) if part != "body")
            problems.append(f"{where or 'body'}: {error.get('msg')}")
        return JSONResponse(
            {"detail": "; ".join(problems), "errors": _jsonable(exc.errors())},
            status_code=422,
        )


def _jsonable(errors: object) -> object:
    import json

    return json.loads(json.dumps(errors, default=str))
