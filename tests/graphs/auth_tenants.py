"""A test `Auth` object for tenants: bearer tokens name users; ann and amy work for one
organisation, whose threads and runs they share (the handler stamps and filters `org`);
bob and bea belong to none, and no handler filters what they do."""

from __future__ import annotations

from typing import Any

from langgraph_sdk import Auth

auth = Auth()

ORGS: dict[str, str | None] = {"ann": "acme", "amy": "acme", "bob": None, "bea": None}


@auth.authenticate
async def authenticate(authorization: str | None) -> Auth.types.MinimalUserDict:
    """`Authorization: Bearer <user>` for a known user; anything else is refused."""
    scheme, _, token = (authorization or "").partition(" ")
    if scheme.lower() != "bearer" or token not in ORGS:
        raise Auth.exceptions.HTTPException(status_code=401, detail="unknown or missing token")
    return {"identity": token, "permissions": ["write"]}


@auth.on.threads
async def by_org(ctx: Auth.types.AuthContext, value: Any) -> dict[str, str] | None:
    """An organisation's members share its threads and runs; others are not filtered."""
    org = ORGS[ctx.user.identity]
    if org is None:
        return None
    metadata = value.get("metadata") if isinstance(value, dict) else None
    if ctx.action in ("create", "create_run", "update") and isinstance(metadata, dict):
        metadata["org"] = org
    return None if ctx.action == "create" else {"org": org}
