"""The OpenAPI document and the interactive API reference at /docs (Swagger UI served by
Runyard itself) and /redoc: open, or behind auth with RUNYARD_AUTH_METRICS_AND_DOCS.

FastAPI's pages load Swagger UI and ReDoc from a CDN (and ReDoc's fonts from Google Fonts),
which leaves them blank on a machine with no internet access; these assets come from the
installed `swagger-ui-bundle-v2` package and, for ReDoc, `fastapi-standalone-docs`.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path
from typing import Literal

from fastapi import APIRouter, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse
from swagger_ui_bundle import swagger_ui_path

ASSETS_PATH = "/docs/assets"
OPENAPI_PATH = "/openapi.json"
Asset = Literal[
    "swagger-ui-bundle.js", "swagger-ui.css", "favicon-32x32.png", "redoc.standalone.js"
]
REDOC_SCRIPT = "redoc.standalone.js"

router = APIRouter(include_in_schema=False)
# Swagger UI's and ReDoc's own files: nothing of this server's, open whatever guards the pages.
assets_router = APIRouter(include_in_schema=False)


@router.get("/docs")
async def swagger_ui(request: Request) -> HTMLResponse:
    """The Swagger UI page for this server's OpenAPI document."""
    root = request.scope.get("root_path", "")
    return get_swagger_ui_html(
        openapi_url=f"{root}{OPENAPI_PATH}",
        title=f"{request.app.title} - Swagger UI",
        swagger_js_url=f"{root}{ASSETS_PATH}/swagger-ui-bundle.js",
        swagger_css_url=f"{root}{ASSETS_PATH}/swagger-ui.css",
        swagger_favicon_url=f"{root}{ASSETS_PATH}/favicon-32x32.png",
    )


@router.get(OPENAPI_PATH)
async def openapi_document(request: Request) -> JSONResponse:
    """This server's OpenAPI document."""
    return JSONResponse(request.app.openapi())


@router.get("/redoc")
async def redoc(request: Request) -> HTMLResponse:
    """The ReDoc page for this server's OpenAPI document."""
    root = request.scope.get("root_path", "")
    return get_redoc_html(
        openapi_url=f"{root}{OPENAPI_PATH}",
        title=f"{request.app.title} - ReDoc",
        redoc_js_url=f"{root}{ASSETS_PATH}/{REDOC_SCRIPT}",
        redoc_favicon_url=f"{root}{ASSETS_PATH}/favicon-32x32.png",
        with_google_fonts=False,
    )


@assets_router.get(ASSETS_PATH + "/{name}")
async def swagger_ui_asset(name: Asset) -> FileResponse:
    """One file of Swagger UI or ReDoc (only the few the pages load can be named)."""
    if name == REDOC_SCRIPT:
        folder = Path(str(files("fastapi_standalone_docs") / "static" / "redoc"))
    else:
        folder = Path(str(swagger_ui_path))
    return FileResponse(folder / name, headers={"Cache-Control": "public, max-age=86400"})
