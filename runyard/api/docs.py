"""The interactive API reference at /docs, with Swagger UI served by Runyard itself.

FastAPI's page loads Swagger UI from a CDN, which leaves it blank on a machine with no
internet access; these assets come from the installed `swagger-ui-bundle-v2` package.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from fastapi import APIRouter, Request
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import FileResponse, HTMLResponse
from swagger_ui_bundle import swagger_ui_path

ASSETS_PATH = "/docs/assets"
Asset = Literal["swagger-ui-bundle.js", "swagger-ui.css", "favicon-32x32.png"]

router = APIRouter(include_in_schema=False)


@router.get("/docs")
async def swagger_ui(request: Request) -> HTMLResponse:
    """The Swagger UI page for this server's OpenAPI document."""
    root = request.scope.get("root_path", "")
    return get_swagger_ui_html(
        openapi_url=f"{root}{request.app.openapi_url}",
        title=f"{request.app.title} - Swagger UI",
        swagger_js_url=f"{root}{ASSETS_PATH}/swagger-ui-bundle.js",
        swagger_css_url=f"{root}{ASSETS_PATH}/swagger-ui.css",
        swagger_favicon_url=f"{root}{ASSETS_PATH}/favicon-32x32.png",
    )


@router.get(ASSETS_PATH + "/{name}")
async def swagger_ui_asset(name: Asset) -> FileResponse:
    """One file of Swagger UI (only the few the page loads can be named)."""
    return FileResponse(
        Path(str(swagger_ui_path)) / name, headers={"Cache-Control": "public, max-age=86400"}
    )
