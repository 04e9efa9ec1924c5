"""The official MCP and A2A clients, pointed at a Runyard server."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import httpx2
from a2a.client import Client as A2AClient
from a2a.client import ClientConfig, ClientFactory, create_client
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    Message,
    Part,
    Role,
    SendMessageRequest,
    StreamResponse,
)
from mcp import Client as McpClient
from mcp.client.streamable_http import streamable_http_client


def bearer(token: str | None) -> dict[str, str]:
    """The Authorization header of a test user (none without a token)."""
    return {"Authorization": f"Bearer {token}"} if token else {}


@asynccontextmanager
async def mcp_client(base_url: str, token: str | None = None) -> AsyncIterator[McpClient]:
    """The `mcp` package's client on the server's /mcp, over streamable HTTP."""
    http = httpx2.AsyncClient(headers=bearer(token), timeout=httpx2.Timeout(60, read=300))
    async with http, McpClient(streamable_http_client(f"{base_url}/mcp", http_client=http)) as mcp:
        yield mcp


@asynccontextmanager
async def a2a_client(
    base_url: str, assistant_id: str, streaming: bool = False, token: str | None = None
) -> AsyncIterator[A2AClient]:
    """The `a2a-sdk` client of one assistant, made from its agent card."""
    async with httpx.AsyncClient(timeout=60, headers=bearer(token)) as http:
        config = ClientConfig(streaming=streaming, httpx_client=http)
        client = await create_client(f"{base_url}/a2a/{assistant_id}", config)
        try:
            yield client
        finally:
            await client.close()


@asynccontextmanager
async def a2a_client_for_card(
    url: str, protocol_version: str = "1.0", streaming: bool = False
) -> AsyncIterator[A2AClient]:
    """An `a2a-sdk` client for an agent URL without fetching its card (a 0.3 one, say)."""
    card = AgentCard(
        name="agent",
        supported_interfaces=[
            AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version=protocol_version)
        ],
        capabilities=AgentCapabilities(streaming=streaming),
    )
    async with httpx.AsyncClient(timeout=60) as http:
        client = ClientFactory(ClientConfig(streaming=streaming, httpx_client=http)).create(card)
        try:
            yield client
        finally:
            await client.close()


def user_message(
    text: str | None = None,
    data: dict[str, Any] | None = None,
    context_id: str | None = None,
    task_id: str | None = None,
) -> SendMessageRequest:
    """A user's message with a text part and/or a data part."""
    parts = []
    if text is not None:
        parts.append(Part(text=text))
    if data is not None:
        part = Part()
        part.data.struct_value.update(data)
        parts.append(part)
    message = Message(
        message_id=str(uuid.uuid4()),
        role=Role.ROLE_USER,
        parts=parts,
        context_id=context_id or "",
        task_id=task_id or "",
    )
    return SendMessageRequest(message=message)


async def send(client: A2AClient, request: SendMessageRequest) -> list[StreamResponse]:
    """Every event the client yields for one message (one task when not streaming)."""
    return [event async for event in client.send_message(request)]


def texts(parts: Any) -> list[str]:
    """The texts of message or artifact parts."""
    return [part.text for part in parts if part.WhichOneof("content") == "text"]
