"""Server endpoints through HTTP."""

from __future__ import annotations

import httpx


async def test_ok_and_info(base_url: str) -> None:
    async with httpx.AsyncClient(base_url=base_url) as http:
        assert (await http.get("/ok")).json() == {"ok": True}
        info = (await http.get("/info")).json()
        assert info["version"]
        assert set(info["graphs"]) >= {"agent", "pipeline", "approval"}
        docs = await http.get("/docs")
        assert docs.status_code == 200
        spec = (await http.get("/openapi.json")).json()
        assert "/info" in spec["paths"]
