"""A test `Auth` object: bearer tokens name users; every resource belongs to its creator."""

from __future__ import annotations

from typing import Any

from langgraph_sdk import Auth

auth = Auth()

USERS: dict[str, dict[str, Any]] = {
    "user-a": {"identity": "user-a", "permissions": ["write"]},
    "user-b": {"identity": "user-b", "permissions": ["write"]},
    "reader": {"identity": "reader", "permissions": []},
    # An operator of the console (docs/console.md), with RUNYARD_CONSOLE_OPERATORS=true.
    "operator": {"identity": "operator", "permissions": ["runyard:operator"]},
}


@auth.authenticate
async def authenticate(authorization: str | None) -> Auth.types.MinimalUserDict:
    """`Authorization: Bearer <user>` for a known user; anything else is refused."""
    scheme, _, token = (authorization or "").partition(" ")
    if scheme.lower() != "bearer" or token not in USERS:
        raise Auth.exceptions.HTTPException(status_code=401, detail="unknown or missing token")
    user: Auth.types.MinimalUserDict = {
        "identity": USERS[token]["identity"],
        "permissions": USERS[token]["permissions"],
    }
    return user


async def owned(ctx: Auth.types.AuthContext, value: Any) -> Any:
    """Creation and updates stamp the owner (creation: writers only), so nobody can hand an
    object to someone else; everything else sees only what it owns (LangGraph's pattern)."""
    if ctx.action == "create" and "write" not in ctx.permissions:
        return False
    if ctx.action in ("create", "update") and "metadata" in value:
        value["metadata"]["owner"] = ctx.user.identity
    config = (value.get("kwargs") or {}).get("config") if ctx.action == "create_run" else None
    if isinstance(config, dict):  # the graph learns who runs it from the server, not the client
        config.setdefault("configurable", {})["owner"] = ctx.user.identity
    return None if ctx.action == "create" else {"owner": ctx.user.identity}


auth.on.threads(owned)
auth.on.assistants(owned)
auth.on.crons(owned)


@auth.on.store
async def own_namespace(ctx: Auth.types.AuthContext, value: Any) -> None:
    """Every store namespace starts with the user's identity."""
    namespace = tuple(value.get("namespace") or ())
    if not namespace or namespace[0] != ctx.user.identity:
        value["namespace"] = (ctx.user.identity, *namespace)
