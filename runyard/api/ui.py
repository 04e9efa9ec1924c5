"""Generative UI routes: the tags that load a graph's components, and the built assets.

The answers are LangGraph's (langgraph-api 0.16.7, `api/ui.py`): `POST /ui/{graph_id}`
answers `text/html` with a `<link>` per stylesheet and a `<script>` per script, joined by
newlines, each URL and argument HTML-escaped; an unknown graph is a plain 404 text. The
assets are served as LangGraph serves them, without auth (a `<script src>` cannot send
credentials), with a content-derived ETag so that every instance answers the same.
"""

from __future__ import annotations

import html
import json
import os
import re
from typing import Any
from urllib.parse import quote

from fastapi import APIRouter, Request
from fastapi.responses import Response

from runyard.api.deps import UiDep
from runyard.domain.errors import InvalidInputError, NotFoundError

router = APIRouter(tags=["Generative UI"])
assets_router = APIRouter(tags=["Generative UI"])
# Not hashed names (`entrypoint.js`): a browser keeps them and asks again with If-None-Match.
CACHE_CONTROL = "no-cache"
TEXT = {"schema": {"type": "string"}}
TAGS_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {
                "schema": {
                    "type": "object",
                    "required": ["name"],
                    "properties": {"name": {"description": "The component to render."}},
                }
            }
        },
    }
}
TAGS_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {"description": "The tags that load the graph's UI.", "content": {"text/html": TEXT}},
    # Plain text with no Content-Type, as LangGraph answers it: no media type to document.
    404: {"description": "The graph has no UI: `UI not found for graph '<graph_id>'`."},
}
ASSET_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "The asset.",
        "content": {"text/javascript": TEXT, "text/css": TEXT},
    },
    304: {"description": "Not modified since the ETag in If-None-Match."},
    404: {"description": "No such asset."},
}


@router.post(
    "/ui/{graph_id}", response_class=Response, responses=TAGS_RESPONSES, openapi_extra=TAGS_BODY
)
async def ui_tags(graph_id: str, request: Request, ui: UiDep) -> Response:
    """The `<script>`/`<link>` tags that render the component `name` of a graph's UI."""
    assets = ui.assets.get(graph_id)
    if assets is None:
        # As every Runyard error, JSON (LangGraph answers this 404 in plain text).
        raise NotFoundError(f"UI not found for graph '{graph_id}'")
    name = _component_name(await request.body())
    tags = [_tag(graph_id, os.path.basename(path), name) for path in assets]
    html_text = "\n".join(tag for tag in tags if tag)
    return Response(content=html_text, headers={"Content-Type": "text/html"})


@assets_router.head("/ui/{graph_id}/{asset}", include_in_schema=False)
@assets_router.get("/ui/{graph_id}/{asset}", response_class=Response, responses=ASSET_RESPONSES)
async def ui_asset(graph_id: str, asset: str, request: Request, ui: UiDep) -> Response:
    """A built asset of a graph's UI (JavaScript, CSS)."""
    found = ui.files.get((graph_id, asset))
    if found is None:
        raise NotFoundError(f"graph {graph_id!r} has no UI asset {asset!r}")
    headers = {"ETag": found.etag, "Cache-Control": CACHE_CONTROL}
    if found.etag in request.headers.get("if-none-match", ""):
        return Response(status_code=304, headers=headers)
    return Response(found.body, media_type=found.content_type, headers=headers)


def _component_name(body: bytes) -> Any:
    try:
        message = json.loads(body or b"null")
    except ValueError:
        raise InvalidInputError('the body must be JSON: {"name": <component name>}') from None
    if not isinstance(message, dict) or "name" not in message:
        raise InvalidInputError("body.name is required: the name of the component to render")
    return message["name"]


def _tag(graph_id: str, basename: str, name: Any) -> str | None:
    url = html.escape(f"/ui/{quote(graph_id, safe='')}/{quote(basename, safe='')}", quote=True)
    ext = os.path.splitext(basename)[1]
    if ext == ".css":
        return f'<link rel="stylesheet" href="{url}" />'
    if ext == ".js":
        global_name = re.sub(r"[^a-zA-Z0-9]", "_", graph_id)
        argument = html.escape(json.dumps(name), quote=True)
        return (
            f'<script src="{url}" onload=\'__LGUI_{global_name}.render('
            f'{argument}, "{{{{shadowRootId}}}}")\'></script>'
        )
    return None
