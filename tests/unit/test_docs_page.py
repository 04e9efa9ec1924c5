"""/docs and /redoc work with no network: every file the pages load is served by Runyard.

Reference: FastAPI's default /docs page, which Runyard served before, loads Swagger UI's
script and stylesheet from cdn.jsdelivr.net and its icon from fastapi.tiangolo.com, so it
stayed blank on a machine without internet access; its /redoc page loads ReDoc from the
same CDN, fonts from fonts.googleapis.com and its icon from fastapi.tiangolo.com.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import httpx
import pytest

from runyard.app.factory import create_app
from runyard.settings import Settings


def app_for(tmp_path: Path, **config: object) -> httpx.AsyncClient:
    """A client of the app (no lifespan: the page needs no runtime) for a small project."""
    (tmp_path / "graph.py").write_text("graph = None\n")
    path = tmp_path / "langgraph.json"
    path.write_text(json.dumps({"graphs": {"agent": "./graph.py:graph"}, **config}))
    app = create_app(Settings(RUNYARD_CONFIG=path, RUNYARD_DATA_DIR=tmp_path / "data"))
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://runyard")


def loaded_urls(page: str) -> list[str]:
    """The URLs of the scripts, stylesheets, icons and OpenAPI document the page loads."""
    pattern = r"""(?:src|href|spec-url)=["']([^"']+)["']|url:\s*'([^']+)'"""
    return [a or b for a, b in re.findall(pattern, page)]


# Each page: the number of files it loads, and what its script defines.
PAGES = {
    "/docs": (4, b"SwaggerUIBundle"),  # script, stylesheet, icon, OpenAPI document
    "/redoc": (3, b"Redoc"),  # script, icon, OpenAPI document
}


@pytest.mark.parametrize("page_path", sorted(PAGES))
@pytest.mark.parametrize("prefix", ["", "/my-api"], ids=["root", "mount-prefix"])
async def test_docs_page_loads_only_files_the_server_serves(
    tmp_path: Path, prefix: str, page_path: str
) -> None:
    config = {"http": {"mount_prefix": prefix}} if prefix else {}
    count, defined = PAGES[page_path]
    async with app_for(tmp_path, **config) as http:
        page = await http.get(f"{prefix}{page_path}")
        assert page.status_code == 200
        assert "text/html" in page.headers["content-type"]
        assert "http://" not in page.text and "https://" not in page.text
        urls = loaded_urls(page.text)
        assert len(urls) == count, urls
        for url in urls:
            assert url.startswith(f"{prefix}/"), f"{url} is not served by Runyard"
            answer = await http.get(url)
            assert answer.status_code == 200, url
            assert answer.content, url
        script = next(u for u in urls if u.endswith(".js"))
        assert defined in (await http.get(script)).content


async def test_only_the_page_assets_can_be_fetched(tmp_path: Path) -> None:
    async with app_for(tmp_path) as http:
        assert (await http.get("/docs/assets/swagger-ui.css")).status_code == 200
        for name in ("index.html", "..%2F..%2Fsettings.py", "swagger-initializer.js"):
            assert (await http.get(f"/docs/assets/{name}")).status_code in (404, 422), name


async def test_docs_are_gone_with_disable_meta(tmp_path: Path) -> None:
    async with app_for(tmp_path, http={"disable_meta": True}) as http:
        assert (await http.get("/docs")).status_code == 404
        assert (await http.get("/docs/assets/swagger-ui.css")).status_code == 404
        assert (await http.get("/redoc")).status_code == 404
