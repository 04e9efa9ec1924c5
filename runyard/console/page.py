"""The console's page: one HTML file, its script and its style, shipped in the package and
served from it (nothing is loaded from anywhere else). The page holds no data: it reads the
JSON API, which asks for the operator credential."""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path
from typing import Literal

from fastapi import APIRouter
from fastapi.responses import FileResponse

router = APIRouter(include_in_schema=False)
STATIC = Path(str(files("runyard.console") / "static"))
Asset = Literal["console.js", "console.css"]
# The page talks only to its own server.
POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
    "img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
HEADERS = {"Content-Security-Policy": POLICY, "Cache-Control": "no-cache"}


@router.get("/console")
async def console_page() -> FileResponse:
    """The console's page."""
    return FileResponse(STATIC / "console.html", headers=HEADERS)


@router.get("/console/assets/{name}")
async def console_asset(name: Asset) -> FileResponse:
    """The page's script or style."""
    return FileResponse(STATIC / name, headers=HEADERS)
