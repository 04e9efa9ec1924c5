"""Bearer tokens name users; every resource and run is stamped with its creator."""

from __future__ import annotations

from typing import Any

from langgraph_sdk import Auth

auth = Auth()
USERS = {"ann": ["write", "read"], "bob": ["read"]}


@auth.authenticate
async def authenticate(authorization: str | None) -> Auth.types.MinimalUserDict:
    """`Authorization: Bearer <user>` for a known user."""
    scheme, _, token = (authorization or "").partition(" ")
    if scheme.lower() != "bearer" or token not in USERS:
        raise Auth.exceptions.HTTPException(status_code=401, detail="unknown or missing token")
    return {"identity": token, "permissions": USERS[token], "team": "blue"}


async def owned(ctx: Auth.types.AuthContext, value: Any) -> dict[str, str]:
    """LangGraph's documented pattern: stamp the owner on what is written, filter reads."""
    filters = {"owner": ctx.user.identity}
    if isinstance(value, dict):
        metadata = value.setdefault("metadata", {})
        if isinstance(metadata, dict):
            metadata.update(filters)
    return filters


auth.on.threads(owned)
auth.on.crons(owned)
