"""LangGraph's documented resource-authorization pattern, with one handler that has a typo.

Every resource is stamped with its owner and filtered by it (LangGraph's `add_owner`); the
assistants each graph gets (metadata `created_by: system`) stay readable by every user through
an `$or` filter. The crons handler uses an operator that does not exist (`$in`): Runyard must
refuse it loudly instead of hiding every cron or showing them all.
"""

from __future__ import annotations

from typing import Any

from langgraph_sdk import Auth

auth = Auth()

USERS = ("user-a", "user-b")


@auth.authenticate
async def authenticate(authorization: str | None) -> Auth.types.MinimalUserDict:
    """`Authorization: Bearer <user>` for a known user; anything else is refused."""
    scheme, _, token = (authorization or "").partition(" ")
    if scheme.lower() != "bearer" or token not in USERS:
        raise Auth.exceptions.HTTPException(status_code=401, detail="unknown or missing token")
    return {"identity": token, "permissions": []}


@auth.on
async def add_owner(ctx: Auth.types.AuthContext, value: dict[str, Any]) -> dict[str, Any]:
    """Stamp the owner on what is created; show each user only what they own."""
    filters = {"owner": ctx.user.identity}
    metadata = value.setdefault("metadata", {})
    metadata.update(filters)
    return filters


@auth.on.assistants.read
async def own_or_system_assistants(ctx: Auth.types.AuthContext, value: Any) -> dict[str, Any]:
    """The user's own assistants and the ones the server made for each graph."""
    return {"$or": [{"owner": ctx.user.identity}, {"created_by": "system"}]}


@auth.on.assistants.search
async def search_own_or_system_assistants(
    ctx: Auth.types.AuthContext, value: Any
) -> dict[str, Any]:
    """Searches see what reads see."""
    return {"$or": [{"owner": ctx.user.identity}, {"created_by": "system"}]}


@auth.on.crons
async def crons_with_a_typo(ctx: Auth.types.AuthContext, value: Any) -> dict[str, Any]:
    """`$in` is no filter operator of LangGraph's (nor of Runyard's)."""
    return {"owner": {"$in": [ctx.user.identity]}}
